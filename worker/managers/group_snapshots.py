"""The instant a group plan's run holds: one RBD group snapshot over the plan's volumes
(librbd quiesces and blocks writes on all of them while it snapshots each, so they are
crash-consistent together). The first of the run's backups to start takes it; the others
wait for it. Each backup then reads its volume's member of the snapshot. The last member
to finish removes it (the next run's taker removes one a crash left).

The RBD group `cairn.plan.<plan-id>` lives in the pool of the plan's first volume; the
plan's volumes, in any pool of the cluster, are its images. The snapshot is
`cairn.<group-id>`: both names lead back to their rows.

Only volumes that are still the plan's project's join: the taker asks Cinder (as Cairn's
service user) about every Cinder volume of the run first. One given to another project (a
volume transfer) or deleted is not quiesced, snapshotted or held in the RBD group (an
image in a group cannot be deleted: its new owner's Cinder delete would fail), and is taken
out of a group an earlier run left; its own backup fails with the reason. One transferred
after that check is taken out when its backup is refused (`leave`)."""

from __future__ import annotations

import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import rados
import rbd
from sqlalchemy import func, select, update

from services.base import utcnow
from services.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    StorageError,
    VolumeNotFound,
    VolumeNotOwned,
)
from services.records.groups import RestorePointGroup, group_name, group_snapshot_name
from services.records.jobs import Job
from services.records.plans import Plan
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import ACTIVE_JOB_STATUSES, RestorePointStatus
from services.storage import rbd_images
from services.volumes.ownership import check_owner
from worker.managers.claim import ClaimedJob
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime

log = logging.getLogger(__name__)

CLAIM_SECONDS = 120.0
"""A claim this old without a snapshot was its worker's last act: another member takes
over."""
WAIT_SECONDS = 600.0
"""How long a member waits for another to take the group snapshot."""


def member_snapshot(rt: Runtime, job: ClaimedJob, reporter: JobReporter,
                    volume: Volume) -> int:
    """The snap id of `volume`'s member of its run's group snapshot, which is taken first
    if no member of the run has yet."""
    assert job.group_id is not None
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        reporter.check()
        with rt.db.session() as session:
            taken = session.scalar(select(RestorePointGroup.taken_at)
                                   .where(RestorePointGroup.id == job.group_id))
        if taken is not None:
            break
        if _claim(rt, job.group_id, job.id):
            take(rt, job.group_id)
            break
        if time.monotonic() > deadline:
            raise StorageError(f"the group snapshot of this run ({job.group_id}) was not "
                               f"taken within {WAIT_SECONDS:.0f} s by the member taking it")
        time.sleep(0.5)
    return _member_id(rt, volume, job.group_id)


def _claim(rt: Runtime, group_id: str, job_id: str) -> bool:
    now = utcnow()
    with rt.db.session() as session:
        result = session.execute(
            update(RestorePointGroup)
            .where(RestorePointGroup.id == group_id, RestorePointGroup.taken_at.is_(None),
                   (RestorePointGroup.claimed_by.is_(None))
                   | (RestorePointGroup.claimed_by == job_id)
                   | (RestorePointGroup.claimed_at < now - timedelta(seconds=CLAIM_SECONDS)))
            .values(claimed_by=job_id, claimed_at=now))
        return bool(result.rowcount)  # type: ignore[attr-defined]


def take(rt: Runtime, group_id: str) -> None:
    """Make the plan's RBD group hold exactly the plan's volumes that are still its
    project's, and snapshot it."""
    volumes = _volumes(rt, group_id)
    clusters = {v.cluster for v in volumes}
    if len(clusters) != 1:
        raise InvalidInput("a group snapshot spans one Ceph cluster; this run's volumes are "
                           f"on {', '.join(sorted(clusters)) or 'none'}")
    cluster = clusters.pop()
    home = min(volumes, key=lambda v: (v.pool, v.image))
    with rt.db.session() as session:
        row = session.get_one(RestorePointGroup, group_id)
        plan_id, project_id = row.plan_id, row.project_id
    volumes = _still_owned(rt, volumes, project_id)
    name, snapshot = group_name(plan_id), group_snapshot_name(group_id)
    handle = rt.clusters.handle(cluster)
    with rt.clusters.ioctx(cluster, home.pool) as group_io:
        with contextlib.suppress(rbd.ObjectExists, rbd.ImageExists):  # made by an earlier run
            rbd.RBD().group_create(group_io, name)
        group = rbd.Group(group_io, name)
        have = {(handle.pool_reverse_lookup(i["pool"]) or "", i["name"])
                for i in group.list_images()}
        want = {(v.pool, v.image) for v in volumes}
        for pool, image in sorted(have - want):  # left the plan
            with rt.clusters.ioctx(cluster, pool) as io:
                group.remove_image(io, image)
        for pool, image in sorted(want - have):
            with rt.clusters.ioctx(cluster, pool) as io:
                _join(group, io, pool, image)
        _remove_finished_snapshots(rt, group, keep=snapshot)
        if snapshot not in {s["name"] for s in group.list_snaps()}:
            group.create_snap(snapshot)
    with rt.db.session() as session:
        session.execute(update(RestorePointGroup).where(RestorePointGroup.id == group_id)
                        .values(taken_at=utcnow(), rbd_group=f"{cluster}/{home.pool}/{name}"))
    log.info("group snapshot %s of %s/%s/%s taken over %d volumes", snapshot, cluster,
             home.pool, name, len(volumes))


def _volumes(rt: Runtime, group_id: str) -> list[Volume]:
    """The plan's volumes now, and those of the run's jobs (the plan may be gone)."""
    with rt.db.session() as session:
        group = session.get_one(RestorePointGroup, group_id)
        plan = session.get(Plan, group.plan_id)
        volumes = {v.id: v for v in (plan.volumes if plan is not None else [])}
        for volume in session.scalars(select(Volume).join(Job, Job.volume_id == Volume.id)
                                      .where(Job.group_id == group_id)):
            volumes[volume.id] = volume
        session.expunge_all()
    return list(volumes.values())


OWNER_CHECKS = 8
"""Cinder calls in flight while the taker asks about the run's volumes."""


def _still_owned(rt: Runtime, volumes: list[Volume], project_id: str) -> list[Volume]:
    """The volumes Cinder still says are `project_id`'s (RBD images named by the cloud's
    administrator have no owner in Cinder, and stay). Cinder unreachable fails the take:
    a volume nobody could vouch for is never quiesced."""
    def owned(volume: Volume) -> bool:
        try:
            check_owner(rt.cinder, volume, project_id)
        except (VolumeNotOwned, VolumeNotFound) as exc:
            log.warning("group snapshot of plan volumes: %s stays out (%s)", volume.ref,
                        exc.message)
            return False
        return True

    with ThreadPoolExecutor(OWNER_CHECKS, thread_name_prefix="owner") as pool:
        return [v for v, keep in zip(volumes, pool.map(owned, volumes), strict=True) if keep]


def _join(group: rbd.Group, io: rados.Ioctx, pool: str, image: str) -> None:
    try:
        group.add_image(io, image)
    except rbd.ImageNotFound:
        raise NotFound(f"RBD image {pool}/{image} of this group plan is gone") from None
    except (rbd.ImageExists, rbd.ObjectExists, rbd.InvalidArgument):
        # Another group has it (a Cinder consistency group, or one made by hand): an image
        # is in one group at most, and Cairn never takes it from another.
        raise Conflict(f"RBD image {pool}/{image} is already in another RBD group (a Cinder "
                       "group with consistent snapshots?), and an image can be in one group "
                       "only; take it out of that group or use consistency volume for this "
                       "plan") from None


def _remove_finished_snapshots(rt: Runtime, group: rbd.Group, keep: str) -> None:
    """Earlier runs' group snapshots that no running backup reads any more (their last
    member's worker died before removing them)."""
    for snap in list(group.list_snaps()):
        name = snap["name"]
        if name == keep or not name.startswith("cairn."):
            continue
        if _members_reading(rt, name.removeprefix("cairn.")):
            continue
        group.remove_snap(name)
        _mark_released(rt, name.removeprefix("cairn."))


def _members_reading(rt: Runtime, group_id: str, *, besides: str | None = None) -> int:
    """Backups of the run that may still read the group snapshot: queued or running, and
    not yet past their commit point (a member's restore point is `available` once its copy
    is complete). Members commit one at a time, so of several finishing together, the last
    to commit sees all the others done, and removes the snapshot."""
    with rt.db.session() as session:
        stmt = (select(func.count()).select_from(Job)
                .outerjoin(RestorePoint, RestorePoint.id == Job.restore_point_id)
                .where(Job.group_id == group_id, Job.status.in_(ACTIVE_JOB_STATUSES),
                       RestorePoint.status.is_distinct_from(RestorePointStatus.AVAILABLE)))
        if besides is not None:
            stmt = stmt.where(Job.id != besides)
        return int(session.scalar(stmt) or 0)


def _mark_released(rt: Runtime, group_id: str) -> None:
    with rt.db.session() as session:
        session.execute(update(RestorePointGroup).where(RestorePointGroup.id == group_id)
                        .values(released_at=utcnow()))


def _member_id(rt: Runtime, volume: Volume, group_id: str) -> int:
    snapshot = group_snapshot_name(group_id)
    with rt.clusters.ioctx(volume.cluster, volume.pool) as io, \
            rbd_images.open_image(io, volume.image, read_only=True) as head:
        for snap in head.list_snaps():
            member = snap.get("group")
            if member is not None and member["snap_name"] == snapshot:
                return snap["id"]
    raise NotFound(f"the group snapshot {snapshot} has no member for {volume.ref} (the "
                   "volume joined the plan after the snapshot was taken?)")


def leave(rt: Runtime, job: ClaimedJob, volume: Volume) -> None:
    """Take a volume whose backup was refused (no longer the project's, or gone) out of its
    run: its member of the run's group snapshot, which only its own backup would have read,
    and its place in the plan's RBD group, so that its owner can use and delete it while
    the run's other members are still being copied."""
    if job.group_id is None:
        return
    snapshot = group_snapshot_name(job.group_id)
    with rt.db.session() as session:
        row = session.get(RestorePointGroup, job.group_id)
        where = row.rbd_group if row is not None else None
    with rt.clusters.ioctx(volume.cluster, volume.pool) as io:
        with contextlib.suppress(NotFound), rbd_images.open_image(io, volume.image) as head:
            for snap in list(head.list_snaps()):
                member = snap.get("group")
                if member is not None and member["snap_name"] == snapshot:
                    head.remove_snap_by_id(snap["id"])
        if where is None:
            return  # never taken
        cluster, pool, name = where.split("/", 2)
        with rt.clusters.ioctx(cluster, pool) as group_io, \
                contextlib.suppress(rbd.ImageNotFound, rbd.ObjectNotFound):
            rbd.Group(group_io, name).remove_image(io, volume.image)


def release(rt: Runtime, job: ClaimedJob) -> None:
    """Once no other backup of the run may still read it, remove the run's group snapshot
    from the volumes (it costs their writes copy-on-write)."""
    if job.group_id is None or _members_reading(rt, job.group_id, besides=job.id):
        return
    with rt.db.session() as session:
        row = session.get(RestorePointGroup, job.group_id)
        where = row.rbd_group if row is not None and row.released_at is None else None
    if where is None:
        return
    cluster, pool, name = where.split("/", 2)
    with rt.clusters.ioctx(cluster, pool) as io:
        group = rbd.Group(io, name)
        # Removed already, perhaps: by another member, or by the next run's taker.
        with contextlib.suppress(rbd.ImageNotFound, rbd.ObjectNotFound):
            group.remove_snap(group_snapshot_name(job.group_id))
        if not list(group.list_snaps()) and not _later_run_started(rt, job.group_id):
            _dissolve(rt, cluster, io, group, name)
    _mark_released(rt, job.group_id)


def _later_run_started(rt: Runtime, group_id: str) -> bool:
    """Whether another run of the plan has claimed its snapshot and not released it."""
    with rt.db.session() as session:
        mine = session.get_one(RestorePointGroup, group_id)
        return session.scalar(select(func.count()).select_from(RestorePointGroup).where(
            RestorePointGroup.plan_id == mine.plan_id, RestorePointGroup.id != group_id,
            RestorePointGroup.claimed_by.is_not(None),
            RestorePointGroup.released_at.is_(None))) != 0


def _dissolve(rt: Runtime, cluster: str, io: rados.Ioctx, group: rbd.Group,
              name: str) -> None:
    """Between runs the volumes are in no group: an image in a group cannot be deleted
    (Cinder's delete of the volume would fail), and the plan may change or go. The next
    run makes the group again."""
    handle = rt.clusters.handle(cluster)
    for image in list(group.list_images()):
        pool = handle.pool_reverse_lookup(image["pool"])
        if pool is None:
            continue
        with rt.clusters.ioctx(cluster, pool) as image_io, \
                contextlib.suppress(rbd.ImageNotFound, rbd.ObjectNotFound):
            group.remove_image(image_io, image["name"])
    with contextlib.suppress(rbd.ImageNotFound, rbd.ObjectNotFound):
        rbd.RBD().group_remove(io, name)
