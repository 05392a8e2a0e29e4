"""The failure policy one function owns (`drive.drive`), as pure logic: undo only
before the commit point, aftercare failures are warnings, a committed job is finished and
never undone. The managers' real behaviour on Ceph is in test_restore_point_integrity.py."""

from __future__ import annotations

from typing import Any

import pytest

from services.errors import StorageError
from services.status import JobStatus
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, JobSteps, Outcome, drive
from worker.managers.phases import Phases
from worker.managers.signals import JobCancelled, JobLost


class Reporter:
    def __init__(self) -> None:
        self.finished: dict[str, Any] = {}
        self.phases = Phases()

    def check(self) -> None:
        pass

    def finish(self, status: JobStatus, **values: Any) -> bool:
        self.finished = {"status": status, **values}
        return True


class Steps(JobSteps):
    noun = "backup"

    def __init__(self, *, committed_before: bool = False, fail_at: str = "",
                 aftercare_fails: bool = False) -> None:
        self.state = "committed" if committed_before else "new"
        self.fail_at = fail_at
        self.aftercare_fails = aftercare_fails
        self.calls: list[str] = []

    def committed(self) -> bool:
        if self.fail_at == "database":
            raise ConnectionError("database away")
        return self.state == "committed"

    def work(self) -> Outcome:
        self.calls.append("work")
        if self.fail_at == "before":
            raise StorageError("the pool is full")
        if self.fail_at == "cancelled":
            raise JobCancelled("cancelled at the user's request")
        if self.fail_at == "lost":
            raise JobLost("job j attempt 1 is no longer ours")
        self.state = "committed"
        if self.fail_at == "after":
            raise StorageError("snapshot is protected")
        return Outcome()

    def undo(self) -> str:
        self.calls.append("undo")
        return "the partial copy was removed"

    def record_failure(self, status: JobStatus, code: str, message: str) -> None:
        self.calls.append(f"record {status}")

    def aftercare(self, outcome: Outcome) -> Aftercare:
        def step() -> None:
            self.calls.append("aftercare")
            if self.aftercare_fails:
                raise StorageError("cannot remove cairn.x")
        return [("removing old snapshots", step)]


def _job(attempt: int = 1) -> ClaimedJob:
    return ClaimedJob(id="j", attempt=attempt, max_attempts=3, restore_point_id="rp",
                      volume_id="v", restore_target=None, qos_bytes_per_second=None,
                      qos_ops_per_second=None, cancel_requested=False)


def _drive(steps: Steps, attempt: int = 1) -> dict[str, Any]:
    reporter = Reporter()
    drive(_job(attempt), reporter, steps)  # type: ignore[arg-type]
    return reporter.finished


def test_a_failure_before_the_commit_point_is_undone_and_recorded() -> None:
    steps = Steps(fail_at="before")
    done = _drive(steps)
    assert steps.calls == ["work", "undo", "record failed"]
    assert done["status"] == JobStatus.FAILED
    assert done["error_message"] == "backup failed: the pool is full; the partial copy was removed"


def test_a_failure_after_the_commit_point_is_recorded_and_never_undone() -> None:
    steps = Steps(fail_at="after")
    done = _drive(steps)
    assert "undo" not in steps.calls
    assert done["status"] == JobStatus.FAILED


def test_aftercare_failures_are_warnings_on_a_succeeded_job() -> None:
    steps = Steps(aftercare_fails=True)
    done = _drive(steps)
    assert done["status"] == JobStatus.SUCCEEDED
    assert done["warnings"] == ["removing old snapshots: cannot remove cairn.x"]


@pytest.mark.parametrize("attempt", [2, 4])  # a retry, and one past its attempts
def test_a_job_committed_by_an_earlier_attempt_is_finished_not_redone(attempt: int) -> None:
    steps = Steps(committed_before=True)
    done = _drive(steps, attempt)
    assert steps.calls == ["aftercare"]
    assert done["status"] == JobStatus.SUCCEEDED


def test_out_of_attempts_before_the_commit_point_gives_up_and_undoes() -> None:
    steps = Steps()
    done = _drive(steps, attempt=4)
    assert steps.calls == ["undo", "record failed"]
    assert done["error_code"] == "worker_lost"
    assert "start the backup again" in done["error_message"]


def test_when_the_database_cannot_say_nothing_is_done_or_undone() -> None:
    steps = Steps(fail_at="database")
    with pytest.raises(ConnectionError):
        _drive(steps)
    assert steps.calls == []


def test_a_cancel_undoes_and_ends_the_job_cancelled_in_its_own_words() -> None:
    steps = Steps(fail_at="cancelled")
    done = _drive(steps)  # a signal, not an error: drive returns, the task does not fail
    assert steps.calls == ["work", "undo", "record cancelled"]
    assert (done["status"], done["error_code"]) == (JobStatus.CANCELLED, "cancelled")
    assert done["error_message"] == ("cancelled at the user's request; the partial copy was "
                                     "removed")


def test_a_lost_job_is_left_to_the_attempt_that_owns_it() -> None:
    steps = Steps(fail_at="lost")
    with pytest.raises(JobLost):
        _drive(steps)
    assert steps.calls == ["work"]


class LongAfterCommit(Steps):
    """A job whose work goes on after its commit point (an instant restore's flatten)."""

    def after_commit(self) -> Outcome:
        self.calls.append("after_commit")
        if self.fail_at == "flatten":
            raise StorageError("the flatten failed")
        return Outcome(summary="flattened")


def test_a_committed_job_resumes_its_work_after_the_commit_point() -> None:
    steps = LongAfterCommit(committed_before=True)
    done = _drive(steps, attempt=2)
    assert steps.calls == ["after_commit", "aftercare"]
    assert (done["status"], done["summary"]) == (JobStatus.SUCCEEDED, "flattened")


def test_a_failure_after_the_commit_point_of_a_resumed_job_is_never_undone() -> None:
    steps = LongAfterCommit(committed_before=True, fail_at="flatten")
    done = _drive(steps, attempt=2)
    assert steps.calls == ["after_commit", "record failed"]
    assert done["status"] == JobStatus.FAILED
    assert "the flatten failed" in done["error_message"]
