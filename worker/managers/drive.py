"""Running a claimed job's steps (`JobSteps`) with the failure policy every kind of job
shares (`drive`), and the words a failure is recorded in (`failure_reason`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError

from services.errors import CairnError
from services.status import JobStatus
from worker.engine.copy import CopyStats
from worker.managers.claim import ClaimedJob
from worker.managers.reporter import JobReporter
from worker.managers.signals import JobCancelled, JobLost, JobSignal

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """How a job's work ended when it raised nothing: succeeded, or (a verify that found
    corruption) failed with a reason, with the copy's figures when it copied."""

    stats: CopyStats | None = None
    summary: str | None = None
    error_code: str | None = None
    error_message: str | None = None


Aftercare = list[tuple[str, Callable[[], None]]]
"""Steps after the commit point, each named for the warning its failure leaves."""


class JobSteps:
    """What one kind of job does, in the order the lifecycle drives it (`drive`):

    1. `committed()`: whether an earlier attempt already passed the commit point (a
       backup's restore point is `available`): the work is then not done again and nothing
       is ever undone; `after_commit()` and the aftercare run.
    2. `work()`: everything up to and including the commit point (and, for a job whose
       work goes on after it, such as an instant restore's flatten, `after_commit()`).
    3. On a failure before the commit point: `undo()` removes what the job made, and
       `record_failure()` records the reason on the job's own rows. Never after it.
    4. `aftercare(outcome)`: best-effort steps after the commit point; a failing one is a
       warning on the job, never a reason to undo.

    This is the one place that rule lives, so no manager can get it wrong on its own."""

    noun = "job"

    def committed(self) -> bool:
        return False

    def after_commit(self) -> Outcome:
        """What is left to do once an earlier attempt passed the commit point; its failure
        is recorded, never undone."""
        return Outcome(summary="finished after the worker of an earlier attempt stopped")

    def work(self) -> Outcome:
        raise NotImplementedError

    def undo(self) -> str:
        """Remove what the job made; returns what was done, for the job's reason ("" when
        there was nothing to say)."""
        return ""

    def record_failure(self, status: JobStatus, code: str, message: str) -> None:
        """Record the failure on the job's other rows (the job itself is recorded after)."""

    def aftercare(self, outcome: Outcome) -> Aftercare:
        return []

    def message(self, exc: BaseException) -> str:
        """The reason recorded for a failure (a cancel says so in its own words)."""
        _code, message = failure_reason(exc)
        return message if isinstance(exc, JobCancelled) else f"{self.noun} failed: {message}"


def drive(job: ClaimedJob, reporter: JobReporter, steps: JobSteps) -> None:
    """Run a claimed job's steps with the failure policy of `JobSteps`."""
    # Raises when the database cannot tell: the job then stays running, its heartbeat
    # stops, and the reconciler hands it to a later attempt.
    committed = steps.committed()
    if committed:
        log.info("%s job %s passed its commit point in an earlier attempt; finishing it",
                 steps.noun, job.id)
    elif job.out_of_attempts:
        undone = _undo(steps)
        message = (f"the worker running this {steps.noun} stopped {job.max_attempts} times; "
                   f"gave up{'; ' + undone if undone else ''}. Check the workers' health and "
                   f"start the {steps.noun} again.")
        steps.record_failure(JobStatus.FAILED, "worker_lost", message)
        reporter.finish(JobStatus.FAILED, error_code="worker_lost", error_message=message)
        return
    try:
        reporter.check()
        outcome = steps.after_commit() if committed else steps.work()
    except JobLost:
        raise  # not ours any more: nothing to clean up or record
    except BaseException as exc:
        # Undo only what did not reach its commit point; a failure after it (the work
        # raised once the restore point was available) is recorded and left.
        undone = "" if _committed_or_unknown(steps) else _undo(steps)
        code, _message = failure_reason(exc)
        # The tenant reads `message`; the raw error, which may name hosts and other
        # projects' objects, is for the operator's log, under the job's id.
        log.error("%s job %s failed (%s): %s: %s", steps.noun, job.id, code,
                  type(exc).__name__, exc, exc_info=not isinstance(exc, CairnError | JobSignal))
        message = steps.message(exc)
        if undone:
            message = f"{message}; {undone}"
        status = end_status(exc)
        steps.record_failure(status, code, message)
        reporter.finish(status, error_code=code, error_message=message)
        if not isinstance(exc, CairnError | JobSignal):
            raise
        return
    _finish(reporter, steps, outcome)


def _committed_or_unknown(steps: JobSteps) -> bool:
    try:
        return steps.committed()
    except Exception:
        # Cannot tell (the database is away): undo nothing; the orphan reconciler removes
        # what no row owns once the failure is recorded.
        log.warning("could not tell whether %s passed its commit point", steps.noun,
                    exc_info=True)
        return True


def _undo(steps: JobSteps) -> str:
    try:
        return steps.undo()
    except Exception as exc:
        log.exception("cleaning up after a failed %s", steps.noun)
        _code, reason = failure_reason(exc)
        return f"could not remove what it made ({reason}); the orphan reconciler removes it"


def _finish(reporter: JobReporter, steps: JobSteps, outcome: Outcome) -> None:
    warnings = []
    for what, step in steps.aftercare(outcome):
        try:
            step()
        except Exception as exc:
            _code, message = failure_reason(exc)
            log.warning("%s: %s", what, message, exc_info=not isinstance(exc, CairnError))
            warnings.append(f"{what}: {message}")
    reporter.phases.lap("aftercare")
    status = JobStatus.FAILED if outcome.error_code else JobStatus.SUCCEEDED
    reporter.finish(status, stats=outcome.stats, summary=outcome.summary,
                    error_code=outcome.error_code, error_message=outcome.error_message,
                    warnings=warnings)


def failure_reason(exc: BaseException) -> tuple[str, str]:
    """(code, message) to record for a failure, in words a tenant can read and act on.
    Cairn's own errors say what happened (Ceph's become them where they leave
    `CephClusters.ioctx`); the raw text of others (the database's, Python's) names hosts,
    statements and other projects' ids, so it goes to the worker's log with the job id
    (`drive`), never to the job."""
    if isinstance(exc, CairnError | JobSignal):
        return exc.code, exc.message
    if isinstance(exc, DBAPIError):
        return "database_unavailable", ("the service's database failed during the job; run "
                                        "it again")
    return "internal_error", ("an unexpected error stopped the job; the operator's logs have "
                              "the details")


def end_status(exc: BaseException) -> JobStatus:
    return JobStatus.CANCELLED if isinstance(exc, JobCancelled) else JobStatus.FAILED
