"""Backup targets: the one registry of their kinds.

A target is a `Target` (`services/targets/base.py`): an RBD pool (`rbd_pool.py`), an
object store (`object_store.py`) or a POSIX directory (`directory.py`), one module per
kind; the last two keep the same chunk format (`chunked.py`). This module is the only
place that lists the kinds; everything else finds a target by name here and asks it,
never which kind it is. Adding a kind is a module that makes its targets from the
settings and one line in `_KINDS` (and the worker's half of it: `worker/targets/`).

Why two halves: a target's data path (a backup's copy, a restore, a verify, a delete of a
restore point's data) is built on the worker's copy engine and job lifecycle, and the
domain may not import the worker (the import contracts in pyproject.toml). So the domain's
half here holds what every process needs (kind, job limit, probe, capabilities, the orphan
scan), and the worker keeps a registry of its own, keyed by `Target.kind`, with one module
per kind too; a unit test holds the two to the same kinds."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from services.errors import TargetNotConfigured, UnknownTarget
from services.records.restore_points import RestorePoint
from services.settings import Settings
from services.targets import directory, object_store, rbd_pool
from services.targets.base import SnapshotTarget, Target, not_configured
from services.targets.chunked import ChunkTarget

__all__ = ["ChunkTarget", "SnapshotTarget", "Target", "chunked", "every", "find", "get",
           "holding", "job_limit", "kinds", "names", "resolve", "snapshotted"]

_KINDS: Sequence[tuple[str, Callable[[Settings], Sequence[Target]]]] = (
    (rbd_pool.RbdPoolTarget.kind, rbd_pool.configured),
    (object_store.ObjectStoreTarget.kind, object_store.configured),
    (directory.DirectoryTarget.kind, directory.configured),
)


def kinds() -> list[str]:
    """Every kind of target this Cairn knows."""
    return [kind for kind, _configured in _KINDS]


def every(settings: Settings) -> list[Target]:
    """Every configured target, of every kind, by name."""
    return sorted((target for _kind, configured in _KINDS for target in configured(settings)),
                  key=lambda target: target.name)


def names(settings: Settings) -> list[str]:
    """The names of every configured target, sorted."""
    return [target.name for target in every(settings)]


def find(settings: Settings, name: str | None) -> Target | None:
    """The target of this name, or None when the service does not configure it."""
    return next((target for target in every(settings) if target.name == name), None)


def get(settings: Settings, name: str) -> Target:
    """The target of this name; refused (TargetNotConfigured) when the service does not
    configure it (any more): its restore points wait until the operator configures it
    again."""
    target = find(settings, name)
    if target is None:
        raise not_configured(name)
    return target


def chunked(settings: Settings, name: str) -> ChunkTarget:
    """The target of this name, which keeps its restore points in the chunk format (ADR
    0007), for that format's data path: its settings and its backend, whatever its kind.
    Refused (TargetNotConfigured) when the service does not configure it (any more), or
    configures it as a kind that keeps no chunks."""
    target = get(settings, name)
    if not isinstance(target, ChunkTarget):
        raise TargetNotConfigured(
            f"target {name!r} (kind {target.kind}) keeps no chunks", target=name)
    return target


def snapshotted(settings: Settings, name: str) -> SnapshotTarget:
    """The target of this name, which keeps its restore points as RBD snapshots of backup
    images in a Ceph pool, for what only such a target does (its data path, an instant
    restore's clone, an off-site copy's read), whatever its kind. Refused
    (TargetNotConfigured) when the service does not configure it (any more), or configures
    it as a kind that keeps no snapshots: admission refuses such a job first (by
    `instant_restore_cluster` and `sends_copies`), so only a settings change in between
    reaches this."""
    target = get(settings, name)
    if not isinstance(target, SnapshotTarget):
        raise TargetNotConfigured(
            f"target {name!r} (kind {target.kind}) keeps no RBD snapshots", target=name)
    return target


def resolve(settings: Settings, name: str | None) -> Target:
    """The target a request means: the one it names, or the default; refused (422) with the
    configured ones listed when it is unknown."""
    wanted = name or settings.default_backup_target
    target = find(settings, wanted) if wanted is not None else None
    if target is None:
        known = ", ".join(names(settings)) or "none"
        what = f"unknown backup target {wanted!r}" if wanted else "no backup target given"
        raise UnknownTarget(f"{what}; configured targets: {known}", field="target")
    return target


def holding(settings: Settings, rp: RestorePoint) -> Target:
    """The target a restore point is kept on. One this service no longer configures (say,
    an object target dropped from the settings) cannot be read or removed here: refused
    before any job is queued, not by a worker that cannot find it."""
    target = find(settings, rp.target)
    if target is None:
        raise TargetNotConfigured(
            f"restore point {rp.id} is kept on target {rp.target!r}, which this service does "
            "not configure (any more): ask the operator to configure it again",
            restore_point_id=rp.id, target=rp.target)
    return target


def job_limit(settings: Settings, name: str) -> int:
    """Copy jobs that may run at once against the target of this name; the service-wide
    limit for a name it does not configure (a job queued before the operator removed it)."""
    target = find(settings, name)
    return target.max_jobs if target is not None else settings.max_jobs_per_target
