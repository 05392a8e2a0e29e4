"""Restores and deletions of restore points. Both check the restore point's state here and
again in the worker (guarded updates), so a race between them is refused, never half-done."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from services import targets
from services.base import new_id
from services.clock import require_aware
from services.context import RequestContext
from services.errors import (
    Conflict,
    Forbidden,
    ImageExists,
    InvalidInput,
    InvalidStatusTransition,
    RestorePointBusy,
)
from services.jobs import factory
from services.jobs import repository as jobs
from services.jobs.submit import submit
from services.openstack.cinder_gateway import CinderGateway
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.restore_points import cinder_restores
from services.restore_points import repository as restore_points
from services.restore_points.instant import instant_image_name, pinned_by_instant_restore
from services.restore_points.schemas import RestoreCreate, VerifyCreate
from services.settings import Settings
from services.status import (
    RESTORE_POINT_TRANSITIONS,
    JobKind,
    RestoreMethod,
    RestorePointStatus,
    VerifyStatus,
    guarded_update,
)
from services.storage import rbd_images
from services.storage.ceph import CephClusters
from services.storage.refs import ImageRef, parse_image_ref, require_unreserved


def start_restore(session: Session, ctx: RequestContext, settings: Settings,
                  clusters: CephClusters, cinder: CinderGateway | None, rp_id: str,
                  request: RestoreCreate) -> Job:
    rp = _available(session, ctx, rp_id, "restored")
    targets.holding(settings, rp)
    if rp.verify_status == VerifyStatus.CORRUPT:
        raise RestorePointBusy(
            f"restore point {rp.id} failed verification ({rp.corrupt_object_count} corrupt "
            "objects); restore from another restore point, or verify it again if the backup "
            "pool was repaired", restore_point_id=rp.id)
    # The destination is checked, and a new Cinder volume made, before the job exists:
    # both name the job (a clone's name, the volume's metadata), so its id comes first.
    job_id = new_id()
    into = _destination(session, ctx, settings, clusters, cinder, rp, request, job_id)
    return submit(session, factory.restore(
        rp, into, job_id=job_id, max_attempts=settings.job_max_attempts,
        qos=factory.Qos(request.qos_bytes_per_second, request.qos_ops_per_second)))


def _destination(session: Session, ctx: RequestContext, settings: Settings,
                 clusters: CephClusters, cinder: CinderGateway | None, rp: RestorePoint,
                 request: RestoreCreate, job_id: str) -> factory.RestoreDestination:
    """Where the restore asked for writes, refused now when it cannot (an image that
    exists, a pool that does not, a volume in use, an instant restore across clusters)."""
    instant = request.mode == RestoreMethod.INSTANT
    if request.target is not None:
        if ctx.token is not None and not ctx.is_admin:
            raise Forbidden("restore into a new Cinder volume (new_volume) or over one "
                            "(volume_id); only administrators may name RBD images directly",
                            field="target")
        dest = require_unreserved(parse_image_ref(
            request.target, field="target", default_cluster=rp.volume.cluster,
            default_pool=rp.volume.pool), field="target")
        clusters.check_known(dest.cluster, field="target")
        if not clusters.pool_exists(dest.cluster, dest.pool):
            raise InvalidInput(f"target {str(dest)!r}: cluster {dest.cluster!r} has no pool "
                               f"{dest.pool!r}", field="target", pool=dest.pool)
        if rbd_images.image_exists(clusters, dest):
            raise ImageExists(
                f"an RBD image {str(dest)!r} already exists; restore into a new image name "
                "(restoring over an existing image is refused so nothing is overwritten)",
                target=str(dest))
        if instant:
            _check_same_cluster(settings, rp, dest.cluster)
        return factory.NewImage(str(dest), request.mode)
    if cinder is None:
        raise InvalidInput("restores into Cinder volumes need Cinder configured "
                           "(CAIRN_CINDER) and auth_strategy keystone")
    if request.new_volume is not None and instant:
        _check_same_cluster(settings, rp, cinder.settings.cluster)
        return factory.AdoptedVolume(
            clone=str(ImageRef(cinder.settings.cluster, cinder.settings.pool,
                               instant_image_name(job_id))),
            volume=cinder_restores.adoption_spec(ctx, cinder, rp, request.new_volume))
    if request.new_volume is not None:
        volume_id = cinder_restores.create_volume(session, ctx, cinder, rp, job_id,
                                                  request.new_volume)
        return factory.NewVolume(volume_id, str(cinder.image_ref(volume_id)))
    assert request.volume_id is not None
    if request.cinder_backup:
        volume_id = cinder_restores.check_held_by_cinder_backup(ctx, cinder, rp,
                                                                request.volume_id)
        return factory.HeldByCinderBackup(volume_id, str(cinder.image_ref(volume_id)))
    volume_id = cinder_restores.check_in_place(session, ctx, cinder, rp, request.volume_id)
    return factory.InPlace(volume_id, str(cinder.image_ref(volume_id)))


def _check_same_cluster(settings: Settings, rp: RestorePoint, dest_cluster: str) -> None:
    target = targets.get(settings, rp.target)
    held_on = target.instant_restore_cluster
    if held_on is None:
        raise Conflict(
            f"restore point {rp.id} is kept on {target.noun} "
            f"{rp.target!r}: an instant restore clones an RBD snapshot, which it does not "
            "hold; use a normal restore (mode copy)", restore_point_id=rp.id,
            target=rp.target)
    if held_on != dest_cluster:
        raise Conflict(
            f"restore point {rp.id} is kept on cluster {held_on!r} (target {rp.target!r}) and "
            f"the destination is on cluster {dest_cluster!r}: an instant restore clones the "
            "backup snapshot, which only works within one cluster; use a normal restore "
            "(mode copy)", restore_point_id=rp.id, target=rp.target)


def delete_restore_point(session: Session, ctx: RequestContext, settings: Settings,
                         rp_id: str, now: datetime) -> Job:
    rp = restore_points.get(session, ctx, rp_id)
    targets.holding(settings, rp)
    copier = restore_points.copying_from(session, [rp.id]).get(rp.id)
    if copier is not None:
        raise RestorePointBusy(f"restore point {rp.id} is being copied to target "
                               f"{copier.target!r} by job {copier.id}; delete it after that "
                               "job finishes", restore_point_id=rp.id, job_id=copier.id)
    for kind, doing in ((JobKind.RESTORE, "restored"), (JobKind.VERIFY, "verified")):
        reader = jobs.active_for_restore_point(session, rp.id, kind)
        if reader is not None and reader.restore_method == RestoreMethod.INSTANT:
            raise RestorePointBusy(pinned_by_instant_restore(rp.id, reader),
                                   restore_point_id=rp.id, job_id=reader.id)
        if reader is not None:
            raise RestorePointBusy(
                f"restore point {rp.id} is being {doing} by job {reader.id}; delete it after "
                "that job finishes", restore_point_id=rp.id, job_id=reader.id)
    if rp.locked_until is not None and rp.locked_until > now:
        raise RestorePointBusy(
            f"restore point {rp.id} is locked until {rp.locked_until.isoformat()}; it can be "
            "deleted after that, or once an administrator removes the lock (PATCH "
            "locked_until null)", restore_point_id=rp.id,
            locked_until=rp.locked_until.isoformat())
    if rp.status in (RestorePointStatus.CREATING, RestorePointStatus.DELETING):
        raise RestorePointBusy(
            f"restore point {rp.id} is {rp.status}; try again when that has finished",
            restore_point_id=rp.id, status=rp.status)
    if not guarded_update(session, RestorePoint, rp.id, RESTORE_POINT_TRANSITIONS,
                          RestorePointStatus.DELETING):
        raise InvalidStatusTransition(f"restore point {rp.id} changed state; try again")
    return submit(session, factory.delete(rp, max_attempts=settings.job_max_attempts))


def start_verify(session: Session, ctx: RequestContext, settings: Settings, rp_id: str,
                 request: VerifyCreate) -> Job:
    rp = _available(session, ctx, rp_id, "verified")
    targets.holding(settings, rp)
    running = jobs.active_for_restore_point(session, rp.id, JobKind.VERIFY)
    if running is not None:
        return running  # verifying twice at once would only read everything twice
    return submit(session, factory.verify(
        rp, fraction=request.sample_fraction, max_attempts=settings.job_max_attempts,
        qos=factory.Qos(request.qos_bytes_per_second, request.qos_ops_per_second)))


def _available(session: Session, ctx: RequestContext, rp_id: str, to_be: str) -> RestorePoint:
    rp = restore_points.get(session, ctx, rp_id)
    if rp.status != RestorePointStatus.AVAILABLE:
        raise RestorePointBusy(
            f"restore point {rp.id} is {rp.status}; only an available restore point can be "
            f"{to_be}", restore_point_id=rp.id, status=rp.status)
    return rp


def set_lock(session: Session, ctx: RequestContext, rp_id: str,
             locked_until: datetime | None, now: datetime) -> RestorePoint:
    """Immutability that holds: anyone who may update a restore point may lock it or
    extend its lock; only an administrator may shorten or remove a lock in force (a
    compromised member account cannot unlock and delete the backups it would ransom)."""
    rp = restore_points.get(session, ctx, rp_id)
    new = require_aware(locked_until, "locked_until")
    current = rp.locked_until if rp.locked_until is not None and rp.locked_until > now \
        else None
    if current is not None and (new is None or new < current) and not ctx.is_admin:
        raise Forbidden(
            f"restore point {rp.id} is locked until {current.isoformat()}; a lock can be "
            "extended, but only an administrator may shorten or remove it",
            restore_point_id=rp.id, locked_until=current.isoformat())
    if rp.status in (RestorePointStatus.DELETING, RestorePointStatus.DELETED):
        raise RestorePointBusy(f"restore point {rp.id} is {rp.status}; it cannot be locked",
                               restore_point_id=rp.id, status=rp.status)
    rp.locked_until = new
    session.flush()
    return rp
