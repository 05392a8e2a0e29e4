"""A copy job: an available restore point of an RBD target sent to an object target, read
from its backup snapshot in the backup pool (the tenant's volume is not read again). The
copy is a restore point of its own, `available` once its manifest is stored; a failure
before that removes its manifest (the chunks stay for a retry to find).

After the volume's first copy to the target, a copy reads only the objects that changed
between the two backup snapshots (the backup image keeps both), and sends only the chunks
the target lacks."""

from __future__ import annotations

from contextlib import ExitStack

from sqlalchemy import select

from services import targets
from services.errors import NotFound, RestorePointBusy
from services.plans.prunes import request_prune
from services.records.restore_points import RestorePoint, backup_image_name, snapshot_name
from services.status import RestorePointStatus
from services.storage import rbd_images
from worker.engine.chunk_store import ChunkStore
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, Outcome, drive
from worker.managers.lifecycle import run_job
from worker.managers.object_backup import ObjectBase, commit, previous_manifest, send
from worker.managers.object_stores import remove_manifest
from worker.managers.reporter import JobReporter
from worker.managers.restore_point_steps import RestorePointSteps
from worker.runtime import Runtime


def run_copy(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "copy",
            lambda job, reporter: drive(job, reporter, CopySteps(rt, job, reporter)))


class CopySteps(RestorePointSteps):
    """Commit point: the copy's restore point turns `available` (the base's `committed`)."""

    noun = "copy"

    def __init__(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
        super().__init__(rt, job, reporter)
        assert self.rp.copied_from_restore_point_id is not None
        with rt.db.session() as session:
            self.source = session.get(RestorePoint, self.rp.copied_from_restore_point_id)
            session.expunge_all()

    def work(self) -> Outcome:
        rt, rp, source = self.rt, self.rp, self.source
        if source is None or source.status != RestorePointStatus.AVAILABLE:
            raise RestorePointBusy(
                f"restore point {rp.copied_from_restore_point_id} is "
                f"{source.status if source else 'gone'}: there is nothing to copy",
                restore_point_id=rp.copied_from_restore_point_id)
        pool = targets.snapshotted(rt.settings, source.target)
        self.reporter.phases.restart()
        with rt.clusters.ioctx(pool.cluster, pool.pool) as backup_io, ExitStack() as stack:
            try:
                image = stack.enter_context(rbd_images.open_image(
                    backup_io, backup_image_name(source.volume_id),
                    snapshot=snapshot_name(source.id), read_only=True))
                snapshots = rbd_images.snapshot_names(image)
            except NotFound:
                raise NotFound(f"the backup snapshot of restore point {source.id} is missing "
                               f"from the backup pool {pool.pool!r}") from None
            self.reporter.phases.lap("open")
            sent = send(rt, self.job, self.reporter, rp, image,
                        lambda store: self._base(store, set(snapshots)),
                        origin=f"{backup_image_name(source.volume_id)}@{snapshot_name(source.id)}")
        stats = commit(rt, rp, sent, source.source_bootable)
        self.reporter.phases.lap("commit")
        return Outcome(stats=stats)

    def _base(self, store: ChunkStore, backup_snapshots: set[str]
              ) -> tuple[ObjectBase | None, set[str], str | None]:
        """The previous copy of the volume on the target. Its chunks are known stored;
        when its own source's backup snapshot is still on the same backup image, only the
        objects changed between the two snapshots are read."""
        assert self.source is not None
        previous, manifest, why_not = previous_manifest(self.rt, self.rp, store)
        if previous is None or manifest is None:
            return None, set(), why_not
        origin = previous.copied_from_restore_point_id
        with self.rt.db.session() as session:
            origin_target = session.scalar(select(RestorePoint.target)
                                           .where(RestorePoint.id == origin)) if origin else None
        since = snapshot_name(origin) if origin else None
        if origin_target != self.source.target or since not in backup_snapshots:
            return None, manifest.names(), (
                f"the backup snapshot the previous restore point {previous.id} on this target "
                f"was copied from is gone: every chunk was read (only the missing ones sent)")
        return ObjectBase(previous.id, manifest, since), set(), None

    def aftercare(self, outcome: Outcome) -> Aftercare:
        plan_id = self.job.plan_id
        if plan_id is None:
            return []
        rt, project_id = self.rt, self.job.project_id

        def prune() -> None:
            # The copies' retention applies once the new copy counts (the prune after the
            # backup it copies ran while the copy was still being made).
            with rt.db.session() as session:
                request_prune(session, plan_id, project_id, rt.clock(),
                              max_attempts=rt.settings.job_max_attempts)

        return [("requesting the plan's prune", prune)]

    def remove_partial(self) -> str:
        remove_manifest(self.rt.settings, self.rp.target, self.rp.project_id, self.rp.id)
        return "the partial copy's manifest was removed (its chunks stay for a retry)"
