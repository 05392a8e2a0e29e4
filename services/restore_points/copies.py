"""Copies of restore points to an object target (off site), read from the backup pool, not
from the tenant's volume again: the copy is a restore point of its own on the object target,
holding the volume at its source's instant, with its own retention, verify and restores."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from services import targets
from services.context import RequestContext
from services.errors import Conflict, InvalidInput, RestorePointBusy
from services.jobs import factory
from services.jobs.submit import submit
from services.quotas import service as quotas
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.restore_points import factory as rp_factory
from services.restore_points import repository as restore_points
from services.restore_points.schemas import CopyCreate
from services.settings import Settings
from services.status import RestorePointKind, RestorePointStatus, VerifyStatus


def start_copy(session: Session, ctx: RequestContext, settings: Settings, rp_id: str,
               request: CopyCreate) -> Job:
    source = restore_points.get(session, ctx, rp_id)
    targets.holding(settings, source)
    target = targets.resolve(settings, request.target).name
    check_copyable(settings, source, target)
    existing = copy_of(session, source.id, target)
    if existing is not None:
        raise Conflict(f"restore point {source.id} already has a copy on target {target!r}: "
                       f"restore point {existing.id} ({existing.status})",
                       restore_point_id=existing.id)
    return queue_copy(session, settings, source, target, factory.Qos(
        request.qos_bytes_per_second, request.qos_ops_per_second))


def check_copy_route(settings: Settings, source_target: str, target: str, *, source: str,
                     field: str) -> None:
    """Copies go from a target that sends them (an RBD target's backup pool) to one that
    receives them (an object target), the one route built: refused with the reason for a
    copy request and an off-site plan alike. `target` is configured (resolved)."""
    to = targets.get(settings, target)
    if not to.receives_copies:
        receivers = [t.name for t in targets.every(settings) if t.receives_copies]
        raise InvalidInput(f"{field} {target!r} ({to.noun}) receives no copies; copies go to "
                           "an object target (off site): "
                           + (", ".join(receivers) or "none is configured"), field=field)
    source_kind = targets.find(settings, source_target)
    if source_kind is not None and not source_kind.sends_copies:
        raise InvalidInput(f"{source} is kept on {source_kind.noun} {source_target!r}; only "
                           "restore points of an RBD target are copied", field=field)


def check_copyable(settings: Settings, source: RestorePoint, target: str) -> None:
    check_copy_route(settings, source.target, target, source=f"restore point {source.id}",
                     field="target")
    if source.status != RestorePointStatus.AVAILABLE:
        raise RestorePointBusy(f"restore point {source.id} is {source.status}; only an "
                               "available restore point can be copied",
                               restore_point_id=source.id, status=source.status)
    if source.verify_status == VerifyStatus.CORRUPT:
        raise RestorePointBusy(f"restore point {source.id} failed verification; a copy would "
                               "carry its corruption off site", restore_point_id=source.id)


def queue_copy(session: Session, settings: Settings, source: RestorePoint, target: str,
               qos: factory.Qos, plan_id: str | None = None) -> Job:
    """The copy's restore point (`creating`, dated at its source's instant) and its job. A
    copy is a restore point like a backup's: it counts against the project's quotas, and
    is refused up front when they leave no room for it."""
    room = quotas.estimate(session, source.volume_id, target, RestorePointKind.INCREMENTAL)
    quotas.require_room(session, source.project_id, 1, room)
    copy = RestorePoint(**rp_factory.copy(source, target=target, room=room, plan_id=plan_id))
    session.add(copy)
    session.flush()
    return submit(session, factory.copy(copy, max_attempts=settings.job_max_attempts,
                                        qos=qos, plan_id=plan_id))


def copy_of(session: Session, source_id: str, target: str) -> RestorePoint | None:
    """The live copy of a restore point on a target, if any."""
    return session.scalars(select(RestorePoint).where(
        RestorePoint.copied_from_restore_point_id == source_id, RestorePoint.target == target,
        RestorePoint.status.in_([RestorePointStatus.CREATING, RestorePointStatus.AVAILABLE,
                                 RestorePointStatus.DELETING]))).first()
