"""Submitting a job: the one way a request or a worker asks for work now.

`submit(session, values)` writes the job's row (its values from `services/jobs/factory.py`)
and hands its id to admission only after the unit of work that wrote it commits; nothing is
handed on when it rolls back. So a worker never looks for a row that is not there, and a
request that fails after writing its job starts nothing.

Admission (`services/scheduler/admission.py`) takes the job's concurrency slots and sends it
to the broker (`services/dispatch.py`). A job that gets no slot, or whose message cannot be
sent, stays `queued` and cairn-scheduler admits it later: the jobs table is the outbox, and
the hand-over after the commit only spares the job the wait for the scheduler's round.

Only cairn-api hands its jobs over (`hand_over_after_commit`, wired in `api/main.py`). A job
a worker submits (a plan's off-site copy after its backup) is started by that worker's
hand-on when its own job ends, or by the scheduler's round; the jobs the scheduler plans in
bulk (slots, verifies, prunes: `services/jobs/inserts.py`) are found by admission's round
the same way."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

from services.jobs.factory import JobValues
from services.records.jobs import Job

log = logging.getLogger(__name__)

_SUBMITTED = "cairn_submitted_jobs"

Start = Callable[[list[str]], None]
"""What starts the jobs a committed unit of work submitted: admission, given their ids."""


class Duplicate(Exception):
    """A unique index refused the job: one like it is queued or running already (the
    volume's active backup). Not an error of its own: the caller says what was taken (a
    409, a volume skipped), and the unit of work goes on without the row."""


def submit(session: Session, values: JobValues, *, unique: bool = False) -> Job:
    """Write the job and start it once this unit of work commits.

    `unique`: a unique index may refuse the row (a volume has one active backup at most).
    It is written in a savepoint, and a refusal raises `Duplicate` with the rest of the
    unit of work kept. Not the default: on SQLite a savepoint that is its unit of work's
    first write commits when it is released (pysqlite begins a transaction only before an
    INSERT, UPDATE or DELETE), and a restore or a verify writes nothing before its job: a
    request failing after it would keep the job."""
    job = Job(**values)
    if unique:
        try:
            with session.begin_nested():
                session.add(job)
        except IntegrityError:
            raise Duplicate(f"a unique index refused a new {job.kind} job: one like it "
                            "is queued or running already") from None
    else:
        session.add(job)
        session.flush()
    session.info.setdefault(_SUBMITTED, []).append(job.id)
    return job


def hand_over_after_commit(sessions: sessionmaker[Session], start: Start) -> None:
    """After each commit of a unit of work made by `sessions`, give `start` the ids of the
    jobs it submitted. A failure to start them is logged, never raised: the rows are
    committed as queued, and the scheduler admits them."""

    def after_commit(session: Session) -> None:
        submitted: list[str] = session.info.pop(_SUBMITTED, [])
        if not submitted:
            return
        try:
            start(submitted)
        except Exception:
            log.warning("could not start jobs %s now; the scheduler will retry", submitted,
                        exc_info=True)

    def after_soft_rollback(session: Session, previous: SessionTransaction) -> None:
        # Only the end of the whole transaction drops what it would have started. A
        # savepoint rolled back inside it keeps what was submitted, and so does a flush
        # refused inside one (a Duplicate): the flush's own subtransaction, rolled back
        # first, is not a savepoint, and dropping on it lost the jobs submitted before.
        if previous.parent is None:
            session.info.pop(_SUBMITTED, None)

    event.listen(sessions, "after_commit", after_commit)
    event.listen(sessions, "after_soft_rollback", after_soft_rollback)
