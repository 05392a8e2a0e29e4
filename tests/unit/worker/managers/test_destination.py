"""The one resume rule of a restore's destination (`destination.claim`), as pure logic over
an image's metadata: a retry of the job resumes at its own checkpoint; a checkpoint another
job left in the image never becomes this job's start; a volume too small is refused. The
created-image side and both kinds' copies are in tests/integration/worker/
test_resume_and_cancel.py."""

from __future__ import annotations

import pytest

from services.errors import InvalidInput
from services.restore_points.marks import CHECKPOINT_KEY, DONE_KEY, JOB_KEY, RESTORE_POINT_KEY
from worker.engine.copy import CopyStats
from worker.managers.destination import Destination, claim, done_of

MiB = 1 << 20


class Image:
    """An existing RBD image as `claim` sees it: a size and metadata."""

    def __init__(self, size: int, **metadata: str) -> None:
        self._size = size
        self.metadata = dict(metadata)

    def size(self) -> int:
        return self._size

    def metadata_get(self, key: str) -> str:
        return self.metadata[key]  # librbd raises KeyError too

    def metadata_set(self, key: str, value: str) -> None:
        self.metadata[key] = value

    def metadata_remove(self, key: str) -> None:
        del self.metadata[key]


def _claim(image: Image, job_id: str) -> int:
    return claim(image, "ceph-a/volumes/volume-1", job_id, "rp-1", 8 * MiB)  # type: ignore[arg-type]


def test_a_retry_of_the_job_resumes_at_its_checkpoint() -> None:
    image = Image(8 * MiB)
    assert _claim(image, "job-1") == 0
    assert image.metadata == {JOB_KEY: "job-1", RESTORE_POINT_KEY: "rp-1"}
    image.metadata[CHECKPOINT_KEY] = "5"  # the first attempt's progress, then it died
    assert _claim(image, "job-1") == 5


def test_another_jobs_checkpoint_is_never_this_jobs_start() -> None:
    # A restore in place that failed for good left its mark and checkpoint on the volume.
    image = Image(8 * MiB, **{JOB_KEY: "job-0", RESTORE_POINT_KEY: "rp-0",
                              CHECKPOINT_KEY: "7"})
    assert _claim(image, "job-1") == 0
    # Its worker died before its first checkpoint: the retry must start over, not skip
    # the objects the other job wrote.
    assert _claim(image, "job-1") == 0
    assert image.metadata == {JOB_KEY: "job-1", RESTORE_POINT_KEY: "rp-1"}


def test_a_volume_smaller_than_the_restore_point_is_refused_untouched() -> None:
    image = Image(4 * MiB)
    with pytest.raises(InvalidInput, match="smaller than restore point rp-1"):
        _claim(image, "job-1")
    assert image.metadata == {}


def test_the_chunks_done_past_the_checkpoint_are_the_jobs_own_or_none() -> None:
    image = Image(8 * MiB)
    assert _claim(image, "job-1") == 0
    destination = Destination(image, 0, fresh=False, job_id="job-1")  # type: ignore[arg-type]
    destination.checkpoint(CopyStats(resume_index=3, resume_done=(5, 9)))
    assert image.metadata[CHECKPOINT_KEY] == "3"
    assert done_of(image, "job-1") == {5, 9}  # type: ignore[arg-type]
    # A worker of a version before the list claims the image for job-2 and dies: its
    # retry on a newer worker must not take job-1's list for its own.
    image.metadata[JOB_KEY] = "job-2"
    del image.metadata[CHECKPOINT_KEY]
    assert done_of(image, "job-2") == frozenset()  # type: ignore[arg-type]
    # A newer worker's claim for another job removes it with the checkpoint.
    assert _claim(image, "job-3") == 0
    assert DONE_KEY not in image.metadata
    assert CHECKPOINT_KEY not in image.metadata
    image.metadata[DONE_KEY] = "job-3 5,x"
    assert done_of(image, "job-3") == frozenset()  # type: ignore[arg-type]  # unreadable
