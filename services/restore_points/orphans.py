"""The orphan reconciler: every Ceph object Cairn makes carries a name that leads back to
its row (`cairn.<rp>`, `cairn.vol.<volume>`, `cairn.manifest.<rp>`, `cairn.checkpoint.<rp>`);
this walks the names and compares them with the rows.

- Removed, after a grace period (by the object's own timestamp, so a backup that is
  making it now is never raced): a backup snapshot, manifest or checkpoint whose restore
  point has no row, is deleted, or failed before it was ever available; a checkpoint of a
  restore point no longer being created; a backup image whose volume has no row, or that
  holds no snapshot while no backup of it is running; a volume's source `cairn.<rp>`
  snapshot whose restore point (of that same volume) is deleted or never became available.
- Reported and left alone: a source `cairn.<id>` snapshot with no row at all (another
  installation's, or another tool's: the tenant's volume is not Cairn's to clean).
- On object targets: a manifest whose restore point is deleted, or failed before it was
  available, is removed after the grace (its chunks then go at the next collection); one
  without a row is reported and left alone, as is a target holding data without its data
  key (nothing on it can be read until the operator puts the key back).
- Flagged: an `available` restore point whose backup snapshot or manifest is gone becomes
  `error` with a reason, since it can no longer be restored. Locked ones too: a lock keeps
  data, it cannot make missing data restorable.
- Removed, after the grace period: an instant restore's clone still under its job's name
  (`cairn-instant-<job>`, whose metadata names that job) when the job ended without handing
  it over. Left behind, it would keep its restore point from ever being deleted.
- Never touched: the data of a locked restore point (its stale checkpoint is not data),
  and anything of a row that is `creating` or `deleting` (its job owns it).

Safe to run in several scheduler replicas: removals are idempotent and a flag is a guarded
update."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Literal

import rados
import rbd
from sqlalchemy import select
from sqlalchemy.orm import Session

from services.db import Database
from services.errors import NotFound
from services.records.jobs import Job
from services.records.restore_points import OWNER_XATTR, RestorePoint
from services.records.volumes import Volume
from services.restore_points.instant import instant_image_name
from services.restore_points.marks import JOB_KEY
from services.settings import Settings, object_target
from services.status import (
    RESTORE_POINT_TRANSITIONS,
    JobKind,
    JobStatus,
    RestoreMethod,
    RestorePointStatus,
    guarded_update,
)
from services.storage import data_keys, rbd_images
from services.storage.ceph import CephClusters
from services.storage.object_layout import DATA_KEY, MANIFESTS, manifest_key, manifest_owner
from services.storage.refs import parse_image_ref
from services.storage.s3 import Bucket

log = logging.getLogger(__name__)

Action = Literal["remove", "flag", "report"]
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_SNAPSHOT = re.compile(rf"^cairn\.({_UUID})$")
_IMAGE = re.compile(rf"^cairn\.vol\.({_UUID})$")
_OBJECT = re.compile(rf"^cairn\.(?:manifest|checkpoint)\.({_UUID})(?:\.\d+)?$")
"""A manifest's head or shard, or a checkpoint."""


@dataclass(frozen=True)
class Finding:
    action: Action
    what: str
    """backup snapshot, backup image, manifest, checkpoint, source snapshot, restore point"""
    location: str
    """cluster/pool/name[@snapshot]"""
    reason: str
    """The row it did not find, or what is wrong with the row it found."""
    restore_point_id: str | None = None


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    applied: bool = False
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Row:
    id: str
    project_id: str
    volume_id: str
    target: str
    status: RestorePointStatus
    ever_available: bool
    locked: bool


def _gone(row: _Row | None) -> str | None:
    """Why a restore point's objects are garbage, or None when a row owns them."""
    if row is None:
        return "no restore point row"
    if row.locked:
        return None
    if row.status == RestorePointStatus.DELETED:
        return f"restore point {row.id} is deleted"
    if row.status == RestorePointStatus.ERROR and not row.ever_available:
        return f"restore point {row.id} failed before it was available"
    return None


class OrphanReconciler:
    def __init__(self, db: Database, clusters: CephClusters, settings: Settings) -> None:
        self.db = db
        self.clusters = clusters
        self.settings = settings

    def run(self, *, apply: bool, grace: timedelta, now: datetime | None = None) -> Report:
        """Find (and with `apply`, act on) what no row owns; objects younger than `grace`
        are left for a later run."""
        now = now or datetime.now(UTC)
        report = Report(applied=apply)
        pools: dict[tuple[str, str], list[str]] = {}
        for name, target in self.settings.backup_targets.items():
            pools.setdefault((target.cluster, target.pool), []).append(name)
        for (cluster, pool), targets in sorted(pools.items()):
            try:
                with self.clusters.ioctx(cluster, pool) as io:
                    self._backup_pool(report, io, f"{cluster}/{pool}", set(targets), apply,
                                      now - grace)
            except Exception as exc:  # one unreachable cluster does not stop the others
                log.warning("orphan scan of %s/%s failed", cluster, pool, exc_info=True)
                report.errors.append(f"{cluster}/{pool}: {type(exc).__name__}: {exc}")
        for name in sorted(self.settings.object_targets):
            try:
                self._object_target(report, name, apply, now - grace)
            except Exception as exc:  # an unreachable store does not stop the others
                log.warning("orphan scan of object target %s failed", name, exc_info=True)
                report.errors.append(f"object target {name}: {type(exc).__name__}: {exc}")
        for scan, label in ((self._source_snapshots, "source snapshots"),
                            (self._instant_clones, "instant restore clones")):
            try:
                scan(report, apply, now - grace)
            except Exception as exc:
                log.warning("orphan scan of %s failed", label, exc_info=True)
                report.errors.append(f"{label}: {type(exc).__name__}: {exc}")
        return report

    # -- rows ---------------------------------------------------------------------------
    def _rows(self, ids: Iterable[str]) -> dict[str, _Row]:
        wanted = sorted(set(ids))
        rows: dict[str, _Row] = {}
        now = datetime.now(UTC)
        with self.db.session() as session:
            for start in range(0, len(wanted), 500):
                for rp in session.scalars(select(RestorePoint).where(
                        RestorePoint.id.in_(wanted[start:start + 500]))):
                    rows[rp.id] = _row(rp, now)
        return rows

    # -- a backup pool ------------------------------------------------------------------
    def _backup_pool(self, report: Report, io: rados.Ioctx, where: str, targets: set[str],
                     apply: bool, cutoff: datetime) -> None:
        # Only restore points complete before the listing are judged: one that became
        # available during it may have written its manifest after the listing passed.
        listed_from = datetime.now(UTC)
        images = [n for n in rbd_images.image_names(io) if _IMAGE.match(n)]
        snaps: dict[str, dict[str, datetime]] = {}  # image -> cairn.<rp> -> taken
        created: dict[str, datetime] = {}
        for name in images:
            times = rbd_images.snapshot_times(io, name)
            if times is not None:
                created[name] = times[0]
                snaps[name] = {n: t for n, t in times[1].items() if _SNAPSHOT.match(n)}
        objects = rbd_images.object_times(io, _OBJECT)
        ids = {n.removeprefix("cairn.") for s in snaps.values() for n in s}
        ids |= {_object_owner(key) for key in objects}
        rows = self._rows(ids)
        owners = {key: rbd_images.object_xattr(io, key, OWNER_XATTR) for key in objects
                  if key.count(".") == 2 and _object_owner(key) not in rows}
        volumes = self._volume_ids([n.removeprefix("cairn.vol.") for n in images]
                                   + [o for o in owners.values() if o])
        live = self._live_backups(targets)

        for name in images:
            volume_id = name.removeprefix("cairn.vol.")
            for snap, taken in sorted(snaps.get(name, {}).items() if volume_id in volumes
                                      else ()):
                rp_id = snap.removeprefix("cairn.")
                row = rows.get(rp_id)
                why = _gone(row)
                if row is not None and why is None and (row.volume_id != volume_id
                                                        or row.target not in targets):
                    why = f"restore point {rp_id} belongs to another volume or target"
                if why is not None and taken < cutoff:
                    self._act(report, apply, Finding("remove", "backup snapshot",
                                                     f"{where}/{name}@{snap}", why, rp_id),
                              partial(_remove_snapshot, io, name, snap))
            if volume_id not in volumes:
                # Not this installation's volume (another Cairn sharing the pool?): its
                # snapshots and image are not ours to judge.
                if created.get(name, cutoff) < cutoff:
                    report.findings.append(Finding(
                        "report", "backup image", f"{where}/{name}",
                        f"no volume row {volume_id} in this Cairn; left alone"))
                continue
            if not self._snaps_now(io, name) \
                    and volume_id not in live and created.get(name, cutoff) < cutoff:
                self._act(report, apply, Finding(
                    "remove", "backup image", f"{where}/{name}",
                    f"it holds no restore point of volume {volume_id} and no backup of it "
                    "is running"), partial(_remove_image, io, name))

        heads = {_object_owner(k) for k in objects if k.startswith("cairn.manifest.")
                 and k.count(".") == 2}
        for key, mtime in sorted(objects.items()):
            rp_id = _object_owner(key)
            is_head = key.count(".") == 2
            if not is_head or mtime >= cutoff:
                continue  # a manifest's shards go with its head
            row = rows.get(rp_id)
            what = "manifest" if key.startswith("cairn.manifest.") else "checkpoint"
            why = _gone(row)
            if what == "checkpoint" and why is None and row is not None \
                    and row.status != RestorePointStatus.CREATING:
                # Never part of a restore point's data, locked or not.
                why = f"restore point {rp_id} is {row.status}, no longer being created"
            if why is None:
                continue
            if row is None and owners.get(key) not in volumes:
                # No row, and no volume row of ours named on it: another installation's
                # (or a tool's) object sharing the pool.
                report.findings.append(Finding(
                    "report", what, f"{where}/{key}", "no restore point row, and it names no "
                    "volume of this Cairn; left alone", rp_id))
                continue
            parts = sorted(k for k in objects if k == key or k.startswith(f"{key}."))
            self._act(report, apply, Finding("remove", what, f"{where}/{key}", why, rp_id),
                      partial(_remove_objects, io, parts))

        # Available restore points whose data is gone can no longer be restored.
        for rp in self._available(targets, listed_from):
            image = f"cairn.vol.{rp.volume_id}"
            missing = []
            if f"cairn.{rp.id}" not in snaps.get(image, {}):
                missing.append(f"its backup snapshot {where}/{image}@cairn.{rp.id}")
            if rp.id not in heads:
                missing.append(f"its checksum manifest {where}/cairn.manifest.{rp.id}")
            if missing:
                reason = (f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} "
                          "gone from the backup pool: this restore point can no longer be "
                          "restored")
                self._act(report, apply, Finding("flag", "restore point", f"{where}/{image}",
                                                 reason, rp.id),
                          partial(self._flag, rp.id, reason))

    # -- an object target ---------------------------------------------------------------
    def _object_target(self, report: Report, target: str, apply: bool,
                       cutoff: datetime) -> None:
        """Manifests whose restore point is gone (a backup whose undo could not reach the
        store, a delete that removed the row's data but crashed before the manifest) keep
        their chunks from garbage collection for ever: removed after the grace. Chunks are
        the collector's (`object_gc`): it frees what no manifest names. A bucket and prefix
        without the key Cairn stored there are not where the target's data is (pointed
        elsewhere, or the key removed): its restore points are not flagged for manifests
        missing there."""
        where = f"object target {target}"
        listed_from = datetime.now(UTC)
        bucket = Bucket(object_target(self.settings, target))
        try:
            wrong = data_keys.problem(self.db, bucket, target)
            if wrong is not None:
                report.findings.append(Finding(
                    "report", "data key", f"{where}/{DATA_KEY}",
                    f"the target {wrong}: nothing on it is read or written until the key is "
                    f"put back ({data_keys.GUIDE})"))
            elsewhere = wrong is not None and bucket.size(DATA_KEY) is None
            manifests: dict[str, tuple[tuple[str, str], datetime]] = {}
            for stored in bucket.list(MANIFESTS):
                owner = manifest_owner(stored.key)
                if owner is not None:
                    manifests[stored.key] = (owner, stored.modified)
            rows = self._rows(rp_id for (_, rp_id), _ in manifests.values())
            for key, ((project_id, rp_id), modified) in sorted(manifests.items()):
                if modified >= cutoff:
                    continue
                row = rows.get(rp_id)
                if row is None:
                    # The prefix is this target's, but a name without a row proves nothing
                    # about who wrote it (a database restored from an older dump?): only a
                    # row can say its data may go.
                    report.findings.append(Finding(
                        "report", "manifest", f"{where}/{key}",
                        "no restore point row; left alone", rp_id))
                    continue
                why = _gone(row)
                if why is None and (row.target != target or row.project_id != project_id):
                    why = f"restore point {rp_id} belongs to another target or project"
                if why is not None:
                    self._act(report, apply, Finding("remove", "manifest", f"{where}/{key}",
                                                     why, rp_id),
                              partial(bucket.delete, key))
            for rp in self._available({target}, listed_from):
                if elsewhere or manifest_key(rp.project_id, rp.id) in manifests:
                    continue
                reason = (f"its manifest {manifest_key(rp.project_id, rp.id)} is gone from "
                          f"{where}: this restore point can no longer be restored")
                self._act(report, apply, Finding("flag", "restore point", where, reason,
                                                 rp.id),
                          partial(self._flag, rp.id, reason))
        finally:
            bucket.close()

    def _snaps_now(self, io: rados.Ioctx, name: str) -> bool:
        """Whether the image holds any snapshot now (after this run's removals)."""
        times = rbd_images.snapshot_times(io, name)
        return times is None or bool(times[1])

    def _volume_ids(self, ids: list[str]) -> set[str]:
        with self.db.session() as session:
            return set(session.scalars(select(Volume.id).where(Volume.id.in_(ids)))) \
                if ids else set()

    def _live_backups(self, targets: set[str]) -> set[str]:
        """Volumes with a restore point being created on these targets."""
        with self.db.session() as session:
            return set(session.scalars(select(RestorePoint.volume_id).where(
                RestorePoint.target.in_(targets),
                RestorePoint.status == RestorePointStatus.CREATING)))

    def _available(self, targets: set[str], before: datetime) -> Iterator[RestorePoint]:
        with self.db.session() as session:
            rows = list(session.scalars(select(RestorePoint).where(
                RestorePoint.target.in_(targets),
                RestorePoint.status == RestorePointStatus.AVAILABLE,
                RestorePoint.completed_at < before)))
            session.expunge_all()
        yield from rows

    def _flag(self, rp_id: str, reason: str) -> None:
        with self.db.session() as session:
            guarded_update(session, RestorePoint, rp_id, RESTORE_POINT_TRANSITIONS,
                           RestorePointStatus.ERROR, expect=RestorePointStatus.AVAILABLE,
                           extra={"status_reason": reason})

    # -- source volumes -----------------------------------------------------------------
    def _source_snapshots(self, report: Report, apply: bool, cutoff: datetime) -> None:
        with self.db.session() as session:
            volumes = _distinct_images(session)
        for (cluster, pool, image_name), volume_ids in sorted(volumes.items()):
            where = f"{cluster}/{pool}/{image_name}"
            try:
                with self.clusters.ioctx(cluster, pool) as io:
                    times = rbd_images.snapshot_times(io, image_name)
            except Exception as exc:
                # An unknown or unreachable cluster, a pool gone: the other volumes go on.
                report.errors.append(f"{where}: {type(exc).__name__}: {exc}")
                continue
            if times is None:
                continue  # the volume is gone from Ceph, and its snapshots with it
            found = {n: t for n, t in times[1].items() if _SNAPSHOT.match(n)}
            rows = self._rows(n.removeprefix("cairn.") for n in found)
            for snap, taken in sorted(found.items()):
                rp_id = snap.removeprefix("cairn.")
                row = rows.get(rp_id)
                if row is None:
                    if taken < cutoff:
                        report.findings.append(Finding(
                            "report", "source snapshot", f"{where}@{snap}",
                            "no restore point row: not Cairn's to remove (another "
                            "installation's or tool's?); left alone", rp_id))
                    continue
                why = _gone(row)
                if row.volume_id not in volume_ids or why is None or taken >= cutoff:
                    continue
                self._act(report, apply, Finding("remove", "source snapshot",
                                                 f"{where}@{snap}", why, rp_id),
                          partial(self._remove_source_snapshot, cluster, pool, image_name,
                                  snap))

    def _remove_source_snapshot(self, cluster: str, pool: str, image: str, snap: str) -> None:
        with self.clusters.ioctx(cluster, pool) as io, rbd_images.open_image(io, image) as head:
            rbd_images.remove_snapshot(head, snap)

    # -- instant restores --------------------------------------------------------------
    def _instant_clones(self, report: Report, apply: bool, cutoff: datetime) -> None:
        """Clones of instant restores that ended (failed or cancelled) before handing them
        over, normally removed by the job's undo (a crash or an unreachable cluster may have
        stopped it). Only ended jobs are looked at: a running one still owns its clone."""
        with self.db.session() as session:
            ended = session.execute(
                select(Job.id, Job.restore_target, RestorePoint)
                .join(RestorePoint, RestorePoint.id == Job.restore_point_id)
                .where(Job.kind == JobKind.RESTORE,
                       Job.restore_method == RestoreMethod.INSTANT,
                       Job.status.in_((JobStatus.FAILED, JobStatus.CANCELLED)),
                       Job.ready_at.is_(None), Job.restore_target.is_not(None),
                       Job.finished_at < cutoff)).all()
            session.expunge_all()
        for job_id, target, rp in ended:
            dest = parse_image_ref(str(target), field="target")
            name = instant_image_name(job_id)
            where = f"{dest.cluster}/{dest.pool}/{name}"
            try:
                with self.clusters.ioctx(dest.cluster, dest.pool) as io:
                    why_not = _not_the_jobs_clone(io, name, job_id,
                                                  (rp.backup_image, rp.snapshot))
            except NotFound:
                continue  # removed by its job's undo, or never made
            except Exception as exc:
                report.errors.append(f"{where}: {type(exc).__name__}: {exc}")
                continue
            if why_not is not None:
                report.findings.append(Finding("report", "instant restore clone", where,
                                               f"{why_not}; left alone", rp.id))
                continue
            self._act(report, apply, Finding(
                "remove", "instant restore clone", where, f"instant restore job {job_id} "
                "ended without handing it over", rp.id),
                partial(self._remove_clone, dest.cluster, dest.pool, name))

    def _remove_clone(self, cluster: str, pool: str, name: str) -> None:
        with self.clusters.ioctx(cluster, pool) as io:
            _remove_image(io, name)

    # -- acting -------------------------------------------------------------------------
    def _act(self, report: Report, apply: bool, finding: Finding,
             action: Callable[[], object]) -> None:
        report.findings.append(finding)
        if not apply:
            return
        try:
            action()
        except Exception as exc:
            log.warning("orphan reconciler could not %s %s %s", finding.action, finding.what,
                        finding.location, exc_info=True)
            report.errors.append(f"{finding.location}: {type(exc).__name__}: {exc}")
            return
        log.warning("orphan reconciler: %s %s %s (%s)",
                    "flagged" if finding.action == "flag" else "removed", finding.what,
                    finding.location, finding.reason)


def _row(rp: RestorePoint, now: datetime) -> _Row:
    return _Row(rp.id, rp.project_id, rp.volume_id, rp.target, rp.status,
                rp.completed_at is not None,
                rp.locked_until is not None and rp.locked_until > now)


def _distinct_images(session: Session) -> dict[tuple[str, str, str], set[str]]:
    images: dict[tuple[str, str, str], set[str]] = {}
    for volume in session.scalars(select(Volume)):
        images.setdefault((volume.cluster, volume.pool, volume.image), set()).add(volume.id)
    return images


def _object_owner(key: str) -> str:
    match = _OBJECT.match(key)
    assert match is not None
    return match.group(1)


def _not_the_jobs_clone(io: rados.Ioctx, name: str, job_id: str,
                        parent: tuple[str, str]) -> str | None:
    """Why the image named after `job_id` is not that job's clone, or None when it is: its
    metadata names the job, or (a crash between the clone and its metadata) it is a clone
    of the job's restore point's backup snapshot."""
    with rbd_images.open_image(io, name, read_only=True) as image:
        owner = rbd_images.metadata(image, JOB_KEY)
        if owner == job_id:
            return None
        if owner is not None:
            return f"its metadata names job {owner}, not job {job_id} whose name it has"
        try:
            _pool, parent_image, parent_snap = image.parent_info()
        except rbd.ImageNotFound:
            return "it is not a clone, and names no job in its metadata"
    if (parent_image, parent_snap) != parent:
        return (f"it is a clone of {parent_image}@{parent_snap}, not of the backup snapshot "
                "its job restored, and names no job in its metadata")
    return None


def _remove_snapshot(io: rados.Ioctx, image: str, snap: str) -> None:
    with rbd_images.open_image(io, image) as handle:
        rbd_images.remove_snapshot(handle, snap)


def _remove_image(io: rados.Ioctx, name: str) -> None:
    rbd_images.remove_image(io, name)


def _remove_objects(io: rados.Ioctx, keys: list[str]) -> None:
    for key in keys:
        rbd_images.remove_object(io, key)
