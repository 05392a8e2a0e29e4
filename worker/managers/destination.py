"""Where a restore writes: its destination image, prepared the same way whatever kind of
target the restore point is read from (`prepare_destination`), with one resume rule.

The rule: the image carries the mark of the restore job writing it (`cairn.restore_job`)
from the moment the job takes it: a new image is created with it, an existing one (a
Cinder volume's) is given it. A retry of that job, after its worker died, finds its mark
and resumes at the image's checkpoint (`cairn.restore_checkpoint`); an image without the
job's mark starts at 0, and a checkpoint another job left in it goes before the mark is
set, so it never passes for this job's. An image standing where a new one is to be created
that is not the job's is refused, never written.

Resuming is safe for every kind because the checkpoint only ever moves past units whose
writes have returned (`worker/engine/resume.py`: an RBD object of the backup snapshot, or
a chunk of an object target's manifest, whichever the restore point's kind copies in); a
job always reads the same restore point, whose snapshot or manifest never changes, so a
unit's index means the same in every attempt; and a resumed image is not fresh, so every
unit from the checkpoint on is written or cleared again, but for those the checkpoint
lists as done past it (`cairn.restore_checkpoint_done`: an object target's download keeps
many chunks in flight, and those that finished out of order are not fetched again). That
list names the job, and is read only when it is the job's: a worker of a version before it
claims an image without removing another job's list. Each key is written on its own, in
any order, and holds only what was true when it was written: units of this job are never
unwritten, so any combination a crash leaves is safe."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field

import rados
import rbd

from services.errors import InvalidInput
from services.restore_points.marks import (
    CHECKPOINT_KEY,
    DONE_KEY,
    JOB_KEY,
    RESTORE_POINT_KEY,
    checkpoint_of,
    resume_point,
)
from services.storage import rbd_images
from services.storage.refs import ImageRef
from worker.engine.copy import CopyStats
from worker.managers.claim import ClaimedJob


@dataclass
class Destination:
    """The image a restore writes, open, and where its copy starts in it."""

    image: rbd.Image
    start: int
    """The unit of the copy it starts at: 0, or an earlier attempt's checkpoint."""
    fresh: bool
    """Created by this attempt: it holds nothing, so only data needs writing."""
    job_id: str = ""
    done: frozenset[int] = frozenset()
    """Units past `start` an earlier attempt completed too: not redone."""
    _saved_done: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        self._saved_done = ",".join(map(str, sorted(self.done)))

    def checkpoint(self, stats: CopyStats) -> None:
        """Keep where a retry resumes (the reporter's `on_persist`): every unit before
        `stats.resume_index` is written, and those of `stats.resume_done`."""
        self.image.metadata_set(CHECKPOINT_KEY, str(stats.resume_index))
        done = ",".join(map(str, stats.resume_done))
        if done != self._saved_done:
            self.image.metadata_set(DONE_KEY, f"{self.job_id} {done}")
            self._saved_done = done

    def finish(self) -> None:
        """The copy is complete: flushed, and no checkpoint left to resume from."""
        self.image.flush()
        _remove_checkpoint(self.image)


def _remove_checkpoint(image: rbd.Image) -> None:
    for key in (DONE_KEY, CHECKPOINT_KEY):
        if rbd_images.metadata(image, key) is not None:
            image.metadata_remove(key)


def done_of(image: rbd.Image, job_id: str) -> frozenset[int]:
    """The units past its checkpoint that job `job_id` completed in the image (none when
    the list is another job's, or unreadable: a retry then redoes them)."""
    saved = rbd_images.metadata(image, DONE_KEY) or ""
    owner, _, listed = saved.partition(" ")
    if owner != job_id or not listed:
        return frozenset()
    try:
        return frozenset(int(index) for index in listed.split(","))
    except ValueError:
        return frozenset()


def prepare_destination(stack: ExitStack, dest_io: rados.Ioctx, dest: ImageRef,
                        job: ClaimedJob, rp_id: str, size: int, *, order: int,
                        create: bool) -> Destination:
    """The image restore point `rp_id` (`size` bytes) is restored into, open on `stack`: a
    new one of 2^`order`-byte objects when `create`, else the existing `dest`; and where
    the copy starts in it (the module's rule)."""
    if not create:
        image = stack.enter_context(rbd_images.open_image(dest_io, dest.image))
        claimed = claim(image, str(dest), job.id, rp_id, size)  # first: it clears another's
        return Destination(image, claimed, fresh=False, job_id=job.id,
                           done=done_of(image, job.id))
    start = resume_point(dest_io, dest.image, job.id) if job.attempt > 1 else None
    if start is None:
        rbd_images.create_image(dest_io, dest.image, size, order=order,
                                metadata={JOB_KEY: job.id, RESTORE_POINT_KEY: rp_id},
                                replace_remnant=job.attempt > 1)
    image = stack.enter_context(rbd_images.open_image(dest_io, dest.image))
    return Destination(image, start or 0, fresh=start is None, job_id=job.id,
                       done=frozenset() if start is None else done_of(image, job.id))


def claim(image: rbd.Image, name: str, job_id: str, rp_id: str, size: int) -> int:
    """Take an existing image (a Cinder volume's, `name`) for restore job `job_id`: where
    the restore starts in it (the module's rule)."""
    if image.size() < size:
        raise InvalidInput(f"{name} is {image.size()} bytes, smaller than restore point "
                           f"{rp_id} ({size} bytes); extend the volume first")
    if rbd_images.metadata(image, JOB_KEY) == job_id:
        return checkpoint_of(image)
    _remove_checkpoint(image)  # another job's: before this job's mark
    image.metadata_set(JOB_KEY, job_id)
    image.metadata_set(RESTORE_POINT_KEY, rp_id)
    return 0
