"""The metadata a restore leaves on the image it writes: which job wrote it (so a retry
knows its own image, and a cleanup never removes one that is not the job's) and how far a
copy got."""

from __future__ import annotations

import rados
import rbd

from services.errors import ImageExists, NotFound
from services.storage import rbd_images

JOB_KEY = "cairn.restore_job"
RESTORE_POINT_KEY = "cairn.restore_point"
CHECKPOINT_KEY = "cairn.restore_checkpoint"
"""The object index before which a copy restore is complete."""
DONE_KEY = "cairn.restore_checkpoint_done"
"""`<job id> <index>,<index>,...`: chunks past the checkpoint that job's copy completed too
(a download's few out-of-order ones, `worker/managers/destination.py`)."""


def remove_if_written_by(ioctx: rados.Ioctx, name: str, job_id: str) -> bool:
    """Remove the image `name` if the restore job `job_id` wrote it (never an image it did
    not: it may be a user's); False when there was nothing of the job's to remove."""
    try:
        with rbd_images.open_image(ioctx, name) as image:
            ours = rbd_images.metadata(image, JOB_KEY) == job_id
            if ours:
                # A killed earlier attempt of the job may still hold the lock.
                rbd_images.break_locks(image)
    except NotFound:
        return False
    return ours and rbd_images.remove_image(ioctx, name)


def resume_point(ioctx: rados.Ioctx, name: str, job_id: str) -> int | None:
    """Where an earlier attempt of restore job `job_id` stopped, in the image it created (0:
    at the start); None when there is no such image (the earlier attempt died before
    creating it). An image of that name the job did not write is refused, never reused."""
    try:
        with rbd_images.open_image(ioctx, name) as image:
            if rbd_images.metadata(image, JOB_KEY) != job_id:
                raise ImageExists(f"an RBD image {name!r} appeared in the restore's place; "
                                  "it is not this job's and is left alone")
            rbd_images.break_locks(image)
            return checkpoint_of(image)
    except NotFound:
        return None


def checkpoint_of(image: rbd.Image) -> int:
    """The object index an earlier attempt of the job finished before (0: none)."""
    saved = rbd_images.metadata(image, CHECKPOINT_KEY)
    return int(saved) if saved else 0
