"""The orphan reconciler: every Ceph object Cairn makes carries a name that leads back to
its row (`cairn.<rp>`, `cairn.vol.<volume>`, `cairn.manifest.<rp>`, `cairn.checkpoint.<rp>`);
this walks the names and compares them with the rows. Each target scans its own location
(`Target.scan_orphans`, one module per kind in `services/targets/`); this runs them, and
scans the source volumes and the instant restores' clones itself.

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
from datetime import UTC, datetime, timedelta
from functools import partial

import rados
import rbd
from sqlalchemy import select
from sqlalchemy.orm import Session

from services import targets
from services.db import Database
from services.errors import NotFound
from services.records.jobs import Job
from services.records.restore_points import SNAPSHOT, RestorePoint
from services.records.volumes import Volume
from services.restore_points.instant import instant_image_name
from services.restore_points.marks import JOB_KEY
from services.settings import Settings
from services.status import JobKind, JobStatus, RestoreMethod
from services.storage import rbd_images
from services.storage.ceph import CephClusters
from services.storage.refs import parse_image_ref
from services.targets.scans import Finding, OrphanScan, Report, gone

__all__ = ["Finding", "OrphanReconciler", "Report"]

log = logging.getLogger(__name__)


class OrphanReconciler:
    def __init__(self, db: Database, clusters: CephClusters, settings: Settings) -> None:
        self.db = db
        self.clusters = clusters
        self.settings = settings

    def run(self, *, apply: bool, grace: timedelta, now: datetime | None = None) -> Report:
        """Find (and with `apply`, act on) what no row owns; objects younger than `grace`
        are left for a later run."""
        now = now or datetime.now(UTC)
        scan = OrphanScan(self.db, self.clusters, Report(applied=apply), apply, now - grace,
                          self.settings.orphan_scan_target_seconds)
        # Targets that keep their data at one location (two RBD targets on one pool) are
        # scanned once, together: each judges the others' restore points as its own.
        places: dict[str, list[targets.Target]] = {}
        for target in targets.every(self.settings):
            places.setdefault(target.location, []).append(target)
        for location, sharing in sorted(places.items()):
            try:
                sharing[0].scan_orphans(scan, {target.name for target in sharing})
            except Exception as exc:  # one unreachable or endless store stops no other
                log.warning("orphan scan of %s failed", location, exc_info=True)
                scan.failed(location, exc)
        for scanner, label in ((self._source_snapshots, "source snapshots"),
                               (self._instant_clones, "instant restore clones")):
            try:
                scanner(scan)
            except Exception as exc:
                log.warning("orphan scan of %s failed", label, exc_info=True)
                scan.failed(label, exc)
        return scan.report

    # -- source volumes -----------------------------------------------------------------
    def _source_snapshots(self, scan: OrphanScan) -> None:
        cutoff = scan.cutoff
        with self.db.session() as session:
            volumes = _distinct_images(session)
        for (cluster, pool, image_name), volume_ids in sorted(volumes.items()):
            where = f"{cluster}/{pool}/{image_name}"
            try:
                with self.clusters.ioctx(cluster, pool) as io:
                    times = rbd_images.snapshot_times(io, image_name)
            except Exception as exc:
                # An unknown or unreachable cluster, a pool gone: the other volumes go on.
                scan.failed(where, exc)
                continue
            if times is None:
                continue  # the volume is gone from Ceph, and its snapshots with it
            found = {n: t for n, t in times[1].items() if SNAPSHOT.match(n)}
            rows = scan.rows(n.removeprefix("cairn.") for n in found)
            for snap, taken in sorted(found.items()):
                rp_id = snap.removeprefix("cairn.")
                row = rows.get(rp_id)
                if row is None:
                    if taken < cutoff:
                        scan.note(Finding(
                            "report", "source snapshot", f"{where}@{snap}",
                            "no restore point row: not Cairn's to remove (another "
                            "installation's or tool's?); left alone", rp_id))
                    continue
                why = gone(row)
                if row.volume_id not in volume_ids or why is None or taken >= cutoff:
                    continue
                scan.act(Finding("remove", "source snapshot", f"{where}@{snap}", why, rp_id),
                         partial(self._remove_source_snapshot, cluster, pool, image_name,
                                 snap))

    def _remove_source_snapshot(self, cluster: str, pool: str, image: str, snap: str) -> None:
        with self.clusters.ioctx(cluster, pool) as io, rbd_images.open_image(io, image) as head:
            rbd_images.remove_snapshot(head, snap)

    # -- instant restores --------------------------------------------------------------
    def _instant_clones(self, scan: OrphanScan) -> None:
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
                       Job.finished_at < scan.cutoff)).all()
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
                scan.failed(where, exc)
                continue
            if why_not is not None:
                scan.note(Finding("report", "instant restore clone", where,
                                  f"{why_not}; left alone", rp.id))
                continue
            scan.act(Finding(
                "remove", "instant restore clone", where, f"instant restore job {job_id} "
                "ended without handing it over", rp.id),
                partial(self._remove_clone, dest.cluster, dest.pool, name))

    def _remove_clone(self, cluster: str, pool: str, name: str) -> None:
        with self.clusters.ioctx(cluster, pool) as io:
            rbd_images.remove_image(io, name)


def _distinct_images(session: Session) -> dict[tuple[str, str, str], set[str]]:
    images: dict[tuple[str, str, str], set[str]] = {}
    for volume in session.scalars(select(Volume)):
        images.setdefault((volume.cluster, volume.pool, volume.image), set()).add(volume.id)
    return images


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
