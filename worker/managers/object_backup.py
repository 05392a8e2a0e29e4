"""Backup of one volume to an object-storage target (ADR 0007): snapshot the source as for
an RBD target, then send the chunks the store lacks and a manifest that lists every chunk
of the restore point. The restore point becomes `available` only after the manifest is
stored; a failed attempt removes its manifest and source snapshot, and leaves the chunks it
sent for the retry to find (a garbage collection releases them if nothing names them).

From its first chunk lookup to its manifest the backup holds a shared lease on the target,
so no garbage collection sweeps meanwhile: a chunk found in the store stays there until the
manifest naming it is written.

Nothing sealed with another key than the target's becomes available: the store is opened
with the key Cairn's database records and the bucket holds at the start, both are checked
again just before the restore point turns `available` (`services/storage/data_keys.py`),
and the restore point records the key's fingerprint. An incremental whose base was sealed
with another key than the target's now fails (`target_key_changed`) rather than quietly
making a full copy beside restore points nobody can read."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

import rbd
from sqlalchemy import update

from services import targets
from services.base import utcnow
from services.errors import DataCorrupt
from services.limits import target_leases
from services.quotas import chains
from services.records.restore_points import RestorePoint
from services.restore_points import repository as restore_points
from services.status import RestorePointKind, RestorePointStatus
from worker.engine import object_copy, upload_checkpoint
from worker.engine.chunk_store import ChunkStore, ObjectManifest
from worker.engine.copy import CopyStats
from worker.managers import quota_guard
from worker.managers.backup import BackupSteps
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Outcome
from worker.managers.measure_object import ObjectHeld
from worker.managers.object_stores import (
    check_key,
    manifest_of,
    open_store,
    remove_manifest,
    target_backend,
)
from worker.managers.progress import ReporterProgress
from worker.managers.quota_guard import QuotaGuard
from worker.managers.reporter import JobReporter
from worker.managers.source_snapshots import (
    SourceSnapshotRemoval,
    open_source,
    remove_source_snapshot,
)
from worker.runtime import Runtime

log = logging.getLogger(__name__)

CHECKSUM_ALGORITHM = "blake3-keyed"
"""What an object target's manifest names chunks by (each chunk also carries its AEAD tag)."""

LEASE_WAIT_SECONDS = 600.0
"""How long a backup waits for a garbage collection's sweep of its target to end."""


@dataclass(frozen=True)
class ObjectBase:
    restore_point_id: str
    manifest: ObjectManifest
    since: str | None
    """The source snapshot the base was made from, when the volume still has it: changes
    since it are read, the rest taken from the base. None: every allocated chunk is read
    (and only the ones the store lacks are sent)."""
    full: bool = False
    """A synthetic full (a `full` backup, `full_reads: changed`): the base spares it the
    reads of what did not change, and it is recorded as a full with no base. Its manifest
    names every chunk itself, as every manifest does, so it depends on the base no more
    than a full that read everything: a chunk is kept while any manifest names it."""


@dataclass
class Sent:
    """What one upload stored: the manifest written, and how."""

    store: ChunkStore
    """The store it was sealed for, with the key it was sealed with."""
    manifest: ObjectManifest
    transfer: object_copy.TransferStats
    base: ObjectBase | None
    full_reason: str | None
    started: float
    finished: float
    measure: chains.Measure
    """What the restore point's chain holds, this one's manifest included."""


BaseFinder = Callable[[ChunkStore], tuple[ObjectBase | None, set[str], str | None]]
"""The base of an incremental (or None and why not) and the chunk names known stored."""


def send(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
         source: rbd.Image, find_base: BaseFinder, *, origin: str) -> Sent:
    """Send `source` (an image open at the instant `rp` holds) to `rp`'s object target and
    store its manifest, under the target's shared lease (ADR 0007). `origin` names the
    snapshot read for good (its snap id): a retry that reads the same one trusts the
    chunks its checkpoint says an earlier attempt confirmed stored."""
    phases = reporter.phases
    settings = targets.chunked(rt.settings, rp.target).config
    transfer = object_copy.TransferStats()
    # What the quota counts of an object target: the data of the chunks new to the chain,
    # before compression, whether sent now or found stored (not the sealed bytes sent).
    guard = QuotaGuard(rt, rp, lambda _progress: transfer.bytes_new)
    reporter.quota = guard.progress
    store = open_store(rt.settings, rt.db, rp.target, create=True)
    if job.attempt > 1:  # an interrupted attempt's manifest is not trusted
        store.delete_manifest(rp.project_id, rp.id)
    with target_leases.held(rt.db, rp.target, job.id, exclusive=False,
                            ttl_seconds=rt.settings.lease_seconds,
                            wait_seconds=LEASE_WAIT_SECONDS, interrupt=reporter.check) as lease:
        # Before the first lookup: what a checkpoint of this attempt is valid under.
        sweeps = target_leases.sweeps(rt.db, rp.target)
        base, known, full_reason = find_base(store)
        plan = upload_checkpoint.plan_of(
            origin, base=base.restore_point_id if base else None,
            since=base.since if base else None, chunk_size=store_chunk_size(rt, rp),
            image_size=source.size(), key_fingerprint=store.key.fingerprint)
        confirmed_below = 0
        if job.attempt > 1:
            confirmed_below = upload_checkpoint.load(store, rp.project_id, rp.id, plan=plan,
                                                     sweeps=sweeps)
        reporter.on_persist = _checkpointer(store, rp, plan, sweeps, confirmed_below)
        phases.lap("plan")
        started = time.monotonic()
        manifest = object_copy.upload(
            source, store, rp.project_id,
            base=base.manifest if base else None, since=base.since if base else None,
            known=known, chunk_size=store_chunk_size(rt, rp),
            window=settings.uploads_in_flight, pacer=reporter.pacer, stats=transfer,
            progress=ReporterProgress(reporter), confirmed_below=confirmed_below)
        reporter.on_persist = None
        finished = time.monotonic()
        phases.lap("copy")
        reporter.check()
        # What the chain holds with this manifest, before it is stored.
        measure = ObjectHeld(open_store(rt.settings, rt.db, rp.target), rp.project_id,
                             unstored={rp.id: manifest})
        guard.settle(measure)
        lease.check()  # no sweep ran meanwhile: every chunk named is stored
        record_image_size(rt, rp, manifest.image_size)
        store.write_manifest(rp.project_id, rp.id, manifest)
        phases.lap("manifest")
    log.info("%s %s to %s: %s", job.kind, rp.id, rp.target, chunk_summary(transfer, base))
    return Sent(store, manifest, transfer, base, full_reason, started, finished, measure)


def chunk_summary(transfer: object_copy.TransferStats, base: ObjectBase | None) -> str:
    """How an upload dealt with the volume's chunks, in the job's words."""
    reused = "" if base is None else (
        f"; the others were taken unread from restore point {base.restore_point_id}"
        f"{' (a full that read only what changed)' if base.full else ''}")
    return (f"{transfer.chunks} chunks read: {transfer.chunks_zero} all zeros, "
            f"{transfer.chunks_uploaded} sent, {transfer.chunks_known} already stored; "
            f"{transfer.chunks_looked_up} looked up, {transfer.chunks_confirmed} confirmed by "
            f"an earlier attempt{reused}")


def _checkpointer(store: ChunkStore, rp: RestorePoint, plan: str, sweeps: int,
                  saved: int) -> Callable[[CopyStats], None]:
    """Saves the upload's checkpoint with each progress write, when its mark moved. Best
    effort: a checkpoint not saved costs a retry lookups, never correctness."""
    last = saved

    def save(stats: CopyStats) -> None:
        nonlocal last
        if stats.resume_index <= last:
            return
        try:
            upload_checkpoint.save(store, rp.project_id, rp.id, upload_checkpoint.UploadCheckpoint(
                plan, sweeps, stats.resume_index))
            last = stats.resume_index
        except Exception as exc:
            log.warning("could not save the checkpoint of restore point %s: %s", rp.id, exc)
    return save


def record_image_size(rt: Runtime, rp: RestorePoint, size: int) -> None:
    """The image's size on the restore point being created, before its manifest is
    stored: it bounds what a garbage collection reads of that manifest (`manifest_limit`)
    while the restore point is not yet available."""
    with rt.db.session() as session:
        session.execute(update(RestorePoint).where(
            RestorePoint.id == rp.id, RestorePoint.status == RestorePointStatus.CREATING
        ).values(size_bytes=size))


def commit(rt: Runtime, rp: RestorePoint, sent: Sent, bootable: bool | None) -> CopyStats:
    """The restore point turns `available`: its manifest is stored and every chunk it
    names with it."""
    settings = targets.chunked(rt.settings, rp.target).config
    transfer, base = sent.transfer, sent.base
    stats = CopyStats(window=settings.uploads_in_flight, bytes_total=transfer.bytes_read,
                      bytes_done=transfer.bytes_read, bytes_read=transfer.bytes_read,
                      bytes_written=transfer.bytes_sent,
                      engine_seconds=transfer.hash_seal_seconds,
                      write_seconds=transfer.store_seconds, started=sent.started,
                      finished=sent.finished)
    # The last moment to refuse: sealed with a key that is not (any more) the recorded and
    # stored one, the restore point could not be read back.
    check_key(rt.settings, sent.store)
    incremental = base is not None and not base.full
    quota_guard.commit(rt, rp, sent.measure, {
        "size_bytes": sent.manifest.image_size, "bytes_copied": transfer.bytes_sent,
        "bytes_read": transfer.bytes_read,
        "kind": RestorePointKind.INCREMENTAL if incremental else RestorePointKind.FULL,
        "base_restore_point_id": base.restore_point_id if base and incremental else None,
        "full_reason": sent.full_reason, "duration_seconds": stats.elapsed,
        "completed_at": utcnow(), "checksum_algorithm": CHECKSUM_ALGORITHM,
        "key_fingerprint": sent.store.key.fingerprint,
        "objects_checksummed": len(sent.manifest.chunks), "status_reason": None,
        "source_bootable": bootable})
    return stats


def store_chunk_size(rt: Runtime, rp: RestorePoint) -> int:
    """The chunk size `rp`'s target cuts volumes into now."""
    return targets.chunked(rt.settings, rp.target).config.chunk_size_mib << 20


def previous_manifest(rt: Runtime, rp: RestorePoint, store: ChunkStore
                      ) -> tuple[RestorePoint | None, ObjectManifest | None, str | None]:
    """The volume's newest available restore point on `rp`'s target before it, its manifest,
    and why there is no usable one. TargetKeyChanged when it was sealed with another key
    than the target's now: no quiet full copy beside restore points that cannot be read
    (one made before keys were fingerprinted cannot be told apart from corruption)."""
    with rt.db.session() as session:
        previous = restore_points.newest_available(session, rp.volume_id, rp.target, rp)
        session.expunge_all()
    if previous is None:
        return None, None, (f"no earlier available restore point of this volume on target "
                            f"{rp.target!r}: the first backup there is a full copy")
    try:
        return previous, manifest_of(store, previous), None
    except DataCorrupt as exc:
        return previous, None, (f"the manifest of the previous restore point {previous.id} is "
                                f"unusable ({exc.message}): made a full copy")


class ObjectBackupSteps(BackupSteps):
    noun = "backup"
    summary: str | None = None
    """How the chunks went (`chunk_summary`), once sent."""

    def work(self) -> Outcome:
        outcome = super().work()
        outcome.summary = self.summary
        return outcome

    def copy(self) -> tuple[CopyStats, SourceSnapshotRemoval]:
        rt, job, rp, volume, reporter = self.rt, self.job, self.rp, self.volume, self.reporter
        bootable = self.check_owner()
        with rt.clusters.ioctx(volume.cluster, volume.pool) as src_io, ExitStack() as stack:
            reporter.phases.lap("open")
            source_snapshots, snap_id, source = open_source(rt, job, reporter, src_io,
                                                             volume, rp, stack)
            reporter.phases.lap("snapshot")
            sent = send(rt, job, reporter, rp, source,
                        lambda store: self._base(store, source_snapshots),
                        origin=f"source snap {snap_id}")
            self.summary = chunk_summary(sent.transfer, sent.base)
            removal = SourceSnapshotRemoval.run(rt, volume, rp)
            reporter.phases.lap("target_snapshot")
        stats = commit(rt, rp, sent, bootable)
        reporter.phases.lap("commit")
        return stats, removal

    def _base(self, store: ChunkStore, source_snapshots: dict[str, int] | None
              ) -> tuple[ObjectBase | None, set[str], str | None]:
        """The base of an incremental or of a synthetic full (or None and why not), and the
        chunk names known to be stored: those of the volume's newest restore point on the
        target, which this backup's lease keeps from being swept even if that restore point
        is deleted now."""
        rp = self.rp
        full = rp.kind == RestorePointKind.FULL
        previous, manifest, why_not = previous_manifest(self.rt, rp, store)
        if previous is None or manifest is None:
            return None, set(), None if full else why_not
        since, why_not = self._since(previous, source_snapshots)
        if full:
            reads = targets.chunked(self.rt.settings, rp.target).config.full_reads
            if since is None or reads != "changed" \
                    or manifest.chunk_size != store_chunk_size(self.rt, rp):
                return None, manifest.names(), None  # every allocated chunk is read
            return ObjectBase(previous.id, manifest, since, full=True), set(), None
        if why_not is not None:
            return None, manifest.names(), why_not
        return ObjectBase(previous.id, manifest, since), set(), None

    @staticmethod
    def _since(previous: RestorePoint, source_snapshots: dict[str, int] | None
               ) -> tuple[str | None, str | None]:
        """The source snapshot changes since `previous` can be read from (None: every
        allocated chunk is read), and why an incremental cannot build on it at all."""
        if source_snapshots is None:  # a group run's snapshot: no name to diff from
            return None, None
        if previous.copied_from_restore_point_id is not None:
            return None, (
                f"the previous restore point {previous.id} on this target is a copy made "
                "from the backup pool, with no source snapshot of its own: every chunk was "
                "read and only the missing ones sent")
        if previous.snapshot not in source_snapshots:
            return None, (
                f"the source snapshot {previous.snapshot} of the previous restore point "
                f"{previous.id} is gone from the volume (removed outside Cairn?), so changes "
                "since it cannot be computed: made a full copy")
        return previous.snapshot, None

    def clean_up(self) -> None:
        """The manifest and the source snapshot go; the chunks sent stay for a retry to
        find, until a garbage collection finds no manifest naming them."""
        rp = self.rp
        remove_manifest(self.rt.settings, rp.target, rp.project_id, rp.id)
        self.remove_checkpoint()
        remove_source_snapshot(self.rt, self.volume, rp)

    def remove_checkpoint(self) -> None:
        rp = self.rp
        upload_checkpoint.remove(target_backend(self.rt.settings, rp.target), rp.project_id,
                                 rp.id)
