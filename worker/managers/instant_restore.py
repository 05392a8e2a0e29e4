"""Instant restore: the restore point's backup snapshot is cloned (RBD clone format 2) into
the destination pool under a name that leads back to the job, handed over at once (renamed
to the new RBD image, or adopted by Cinder as a new volume through manage-existing), and
then flattened in the background: paced by the job's QoS, with progress, cancel refused.

The commit point is `ready_at`, when the volume became usable. Before it a failure removes
the clone, or the volume Cinder adopted; after it the volume is the user's (they may have
written to it) and nothing is undone. A retry after a crash resumes at the step it
stopped in: a clone or an adopted volume is found by its job's id, and librbd's flatten
skips the objects already copied up."""

from __future__ import annotations

import bisect
import json
import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass

import rados
import rbd
from sqlalchemy import select

from services import targets
from services.base import utcnow
from services.errors import CairnError, ImageExists, NotFound, StorageError
from services.quotas.service import GIB
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.restore_points.instant import instant_image_name
from services.restore_points.marks import JOB_KEY, RESTORE_POINT_KEY, remove_if_written_by
from services.storage import rbd_images
from services.storage.refs import ImageRef, parse_image_ref
from worker.engine.copy import CopyStats
from worker.engine.extents import allocated_objects
from worker.managers.claim import ClaimedJob
from worker.managers.drive import JobSteps, Outcome, failure_reason
from worker.managers.reporter import JobReporter
from worker.managers.signals import JobSignal
from worker.runtime import Runtime

log = logging.getLogger(__name__)

ADOPTED_BY_KEY = "cairn_restore_job"
"""Cinder metadata on an adopted volume: leads back to the job (and finds it on a retry)."""


@dataclass(frozen=True)
class AdoptionSpec:
    name: str
    size_gb: int
    volume_type: str | None
    description: str

    @classmethod
    def of(cls, raw: str) -> AdoptionSpec:
        body = json.loads(raw)
        return cls(name=body["name"], size_gb=int(body["size_gb"]),
                   volume_type=body.get("volume_type"), description=body["description"])


class InstantRestoreSteps(JobSteps):
    noun = "instant restore"

    def __init__(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
        with rt.db.session() as session:
            rp = session.get(RestorePoint, job.restore_point_id)
            row = session.get(Job, job.id)
            assert rp is not None
            assert row is not None
            assert job.restore_target is not None
            spec = row.restore_volume_spec
            session.expunge_all()
        self.rt, self.job, self.reporter, self.rp = rt, job, reporter, rp
        self.dest = parse_image_ref(job.restore_target, field="target")
        self.staging = instant_image_name(job.id)
        self.spec = AdoptionSpec.of(spec) if spec is not None else None
        self.volume_id = job.restore_cinder_volume_id

    # -- before the commit point ------------------------------------------------------

    def committed(self) -> bool:
        with self.rt.db.session() as session:
            return session.scalar(select(Job.ready_at).where(Job.id == self.job.id)) is not None

    def work(self) -> Outcome:
        self.reporter.phases.restart()
        if self.spec is None:
            self._clone_and_rename()
        else:
            self._clone_and_adopt(self.spec)
        self._mark_ready()
        self.reporter.phases.lap("commit")
        return self.after_commit()

    def _clone_and_rename(self) -> None:
        """A new RBD image: the clone is made under the job's name, then takes the asked
        name (an image that has it and is not this job's is never touched)."""
        with self.rt.clusters.ioctx(self.dest.cluster, self.dest.pool) as dest_io:
            if self._owned(dest_io, self.dest.image):
                return  # an earlier attempt renamed it
            self._ensure_clone(dest_io)
            rbd_images.rename_image(dest_io, self.staging, self.dest.image)
        self.reporter.phases.lap("clone")

    def _clone_and_adopt(self, spec: AdoptionSpec) -> None:
        """A new Cinder volume: the clone, grown to the volume's size, is adopted by Cinder
        in the user's project with Cairn's service user; Cinder renames it."""
        assert self.rt.cinder is not None, "checked when the restore was asked for"
        api = self.rt.cinder.as_service_in(self.job.project_id)
        if self.volume_id is None:
            found = api.find_by_metadata(ADOPTED_BY_KEY, self.job.id)
            if found is not None:  # an earlier attempt was stopped after Cinder adopted it
                self._record_volume(found.id)
        if self.volume_id is None:
            with self.rt.clusters.ioctx(self.dest.cluster, self.dest.pool) as dest_io:
                self._ensure_clone(dest_io)
                with rbd_images.open_image(dest_io, self.staging) as clone:
                    if clone.size() < spec.size_gb * GIB:
                        clone.resize(spec.size_gb * GIB)
            self.reporter.phases.lap("clone")
            volume = api.manage(
                host=self.rt.cinder.adoption_host(), image=self.staging, name=spec.name,
                volume_type=spec.volume_type, description=spec.description,
                bootable=bool(self.rp.source_bootable),
                metadata={ADOPTED_BY_KEY: self.job.id, "cairn_restore_point": self.rp.id})
            self._record_volume(volume.id)
        assert self.volume_id is not None
        api.wait_for(self.volume_id, "available", self.rt.cinder.settings.wait_seconds)
        self.dest = self.rt.cinder.image_ref(self.volume_id)
        self.reporter.phases.lap("adopt")

    def _ensure_clone(self, dest_io: rados.Ioctx) -> None:
        if rbd_images.image_exists_in(dest_io, self.staging):
            return  # made by an earlier attempt: the name is this job's
        target = targets.snapshotted(self.rt.settings, self.rp.target)
        with self.rt.clusters.ioctx(target.cluster, target.pool) as backup_io:
            try:
                rbd_images.clone_snapshot(backup_io, self.rp.backup_image, self.rp.snapshot,
                                          dest_io, self.staging)
            except NotFound:
                raise NotFound(f"the backup snapshot of restore point {self.rp.id} is "
                               f"missing from the backup pool {target.pool!r}") from None
        with rbd_images.open_image(dest_io, self.staging) as clone:
            clone.metadata_set(JOB_KEY, self.job.id)
            clone.metadata_set(RESTORE_POINT_KEY, self.rp.id)

    def _owned(self, ioctx: rados.Ioctx, name: str) -> bool:
        try:
            with rbd_images.open_image(ioctx, name, read_only=True) as image:
                owner = rbd_images.metadata(image, JOB_KEY)
        except NotFound:
            return False
        if owner != self.job.id:
            raise ImageExists(f"an RBD image {str(self.dest)!r} appeared in the restore's "
                              "place; it is not this job's and is left alone")
        return True

    def _record_volume(self, volume_id: str) -> None:
        self.volume_id = volume_id
        self.reporter.record(restore_cinder_volume_id=volume_id)

    def _mark_ready(self) -> None:
        """The commit point: the volume is the user's from now on."""
        self.reporter.record(ready_at=utcnow(), restore_target=str(self.dest))

    def undo(self) -> str:
        done: list[str] = []
        if self.spec is not None and self.rt.cinder is not None:
            api = self.rt.cinder.as_service_in(self.job.project_id)
            volume = (self.volume_id
                      or getattr(api.find_by_metadata(ADOPTED_BY_KEY, self.job.id), "id", None))
            if volume is not None:
                api.discard(volume)
                done.append(f"deleted the new Cinder volume {volume}")
        with self.rt.clusters.ioctx(self.dest.cluster, self.dest.pool) as dest_io:
            removed = rbd_images.remove_image(dest_io, self.staging)
            if self.spec is None:  # renamed already, perhaps
                removed = remove_if_written_by(dest_io, self.dest.image, self.job.id) or removed
        if removed:
            done.append(f"removed the clone in {self.dest.cluster}/{self.dest.pool}")
        return "; ".join(done)

    # -- after the commit point -------------------------------------------------------

    def after_commit(self) -> Outcome:
        with self.rt.db.session() as session:
            target = session.scalar(select(Job.restore_target).where(Job.id == self.job.id))
        assert target is not None
        image = parse_image_ref(target, field="target")
        if self.job.out_of_attempts:
            raise StorageError(
                f"the worker flattening {image} stopped {self.job.max_attempts} times; the "
                f"volume works, but reads unchanged data from restore point {self.rp.id}, "
                f"which cannot be deleted until it is flattened (rbd flatten {image.pool}/"
                f"{image.image}, or restore instantly again)")
        self.reporter.phases.restart()
        stats = self._flatten(image)
        self.reporter.phases.lap("flatten")
        return Outcome(stats=stats, summary=f"{image} usable at once, then flattened")

    def _flatten(self, ref: ImageRef) -> CopyStats:
        target = targets.snapshotted(self.rt.settings, self.rp.target)
        with ExitStack() as stack:
            ioctx = stack.enter_context(self.rt.clusters.ioctx(ref.cluster, ref.pool))
            image = stack.enter_context(rbd_images.open_image(ioctx, ref.image))
            try:
                overlap = image.overlap()
            except rbd.ImageNotFound:  # not a clone any more: an earlier attempt finished
                return CopyStats()
            object_size = 1 << image.stat()["order"]
            # What the flatten really copies: the parent's data in the overlap. Progress and
            # QoS count those bytes, not the holes a thin volume is mostly made of.
            backup_io = stack.enter_context(self.rt.clusters.ioctx(target.cluster, target.pool))
            parent = stack.enter_context(rbd_images.open_image(
                backup_io, self.rp.backup_image, snapshot=self.rp.snapshot, read_only=True))
            data = sorted(allocated_objects(parent, overlap, object_size))
            stats = CopyStats(bytes_total=len(data) * object_size)
            self.reporter.start_copy(stats.bytes_total, 0, 1)
            progress = FlattenProgress(self.reporter, stats, data, object_size)
            if self.job.attempt > 1:
                # librbd marks an object as existing in the object map before its copy-up
                # is written, and flatten skips every object the map says exists. A worker
                # killed between the two leaves an object the map claims and the image
                # lacks: flattened over, it would read as zeros once the parent is gone.
                # The rebuild stats every object and makes the map true again.
                image.rebuild_object_map()
            try:
                image.flatten(on_progress=progress)
            except Exception:
                progress.raise_stop()
                raise
            progress.raise_stop()
            stats.bytes_done = stats.bytes_read = stats.bytes_written = stats.bytes_total
            stats.finished = time.monotonic()
            return stats

    def message(self, exc: BaseException) -> str:
        _code, message = failure_reason(exc)
        if self.committed():
            return (f"the volume was usable from the start, but its flatten failed: "
                    f"{message}. It still reads unchanged data from restore point "
                    f"{self.rp.id}, which stays until the volume is flattened")
        return f"instant restore failed: {message}"


class FlattenProgress:
    """librbd's flatten callback (objects done so far): reports progress and paces the
    flatten by the job's QoS, counting the objects that hold data (sleeping here holds
    librbd's next object back). A cancel or a lost job cannot be raised through librbd: it
    is kept, the callback asks librbd to stop, and the manager raises it after."""

    def __init__(self, reporter: JobReporter, stats: CopyStats, data_objects: list[int],
                 object_size: int) -> None:
        self.reporter, self.stats = reporter, stats
        self.data_objects, self.object_size = data_objects, object_size
        self.stop: BaseException | None = None
        self._counted = 0

    def __call__(self, done: int, _total: int) -> int:
        if self.stop is not None:
            return -1
        try:
            counted = bisect.bisect_left(self.data_objects, done)
            new = counted - self._counted
            if new > 0:
                self._counted = counted
                self.stats.qos_wait_seconds += self.reporter.pacer.take(
                    new * self.object_size, new)
                self.stats.bytes_done = counted * self.object_size
                self.stats.bytes_read = self.stats.bytes_written = self.stats.bytes_done
            self.reporter.progress(self.stats)
        except (JobSignal, CairnError) as exc:
            self.stop = exc
            return -1
        return 0

    def raise_stop(self) -> None:
        if self.stop is not None:
            raise self.stop
