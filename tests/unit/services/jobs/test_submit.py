"""A submitted job starts only once the unit of work that wrote it has committed: never
before, never after a rollback, and a broker or admission that fails leaves it queued for
the scheduler (on a real SQLite with the models' schema)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from services.db import Database
from services.jobs import factory
from services.jobs.submit import Duplicate, hand_over_after_commit, submit
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import JobKind, JobStatus, RestorePointKind

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture
def started(db: Database) -> list[list[str]]:
    """The ids each commit handed over, as admission would get them."""
    calls: list[list[str]] = []
    hand_over_after_commit(db.sessions, calls.append)
    return calls


@pytest.fixture
def rp(db: Database) -> RestorePoint:
    with db.session() as session:
        session.add(Volume(id="v1", project_id="p", cluster="ceph-a", pool="volumes",
                           image="img", created_at=NOW))
        point = RestorePoint(id="rp1", project_id="p", volume_id="v1", target="local",
                             kind=RestorePointKind.FULL, created_at=NOW)
        session.add(point)
    return point


def _backup() -> factory.JobValues:
    return factory.backup(project_id="p", volume_id="v1", target="local",
                          kind=RestorePointKind.INCREMENTAL, max_attempts=3, now=NOW)


def _jobs(db: Database) -> list[Job]:
    with db.session() as session:
        return list(session.scalars(select(Job)))


def test_jobs_start_after_the_commit_that_wrote_them_in_the_order_submitted(
        db: Database, rp: RestorePoint, started: list[list[str]]) -> None:
    with db.session() as session:
        verify = submit(session, factory.verify(rp, max_attempts=3, fraction=None))
        delete = submit(session, factory.delete(rp, max_attempts=3))
        # Written (a worker may look for it once it is started), not started yet.
        assert session.get(Job, verify.id) is verify
        assert started == []
    assert started == [[verify.id, delete.id]]
    assert {(j.id, j.status) for j in _jobs(db)} == {(verify.id, JobStatus.QUEUED),
                                                    (delete.id, JobStatus.QUEUED)}


def test_a_unit_of_work_that_rolls_back_keeps_no_job_and_starts_none(
        db: Database, rp: RestorePoint, started: list[list[str]]) -> None:
    """The job is the unit of work's first write here, as a restore's or a verify's is:
    it must go with the rollback (a savepoint would have committed it on SQLite)."""
    def restore_then_fail() -> None:
        with db.session() as session:
            submit(session, factory.restore(rp, factory.NewImage("ceph-a/volumes/back"),
                                            max_attempts=3))
            raise RuntimeError("the request failed after its job was written")

    with pytest.raises(RuntimeError, match="after its job"):
        restore_then_fail()
    with db.session() as session:
        submit(session, factory.verify(rp, max_attempts=3, fraction=None))
        session.rollback()
    assert started == []
    assert _jobs(db) == []


def test_a_second_active_backup_of_a_volume_is_a_duplicate_and_the_rest_goes_on(
        db: Database, rp: RestorePoint, started: list[list[str]]) -> None:
    """As a run-now meets a volume whose backup started at the same moment: the refused
    row goes, and the jobs submitted before and after it still start at the commit."""
    with db.session() as session:
        first = submit(session, _backup(), unique=True)
        with pytest.raises(Duplicate):
            submit(session, _backup(), unique=True)
        verify = submit(session, factory.verify(rp, max_attempts=3, fraction=None))
    assert started == [[first.id, verify.id]]
    assert sorted(j.kind for j in _jobs(db)) == [JobKind.BACKUP, JobKind.VERIFY]


def test_jobs_that_cannot_be_started_now_stay_queued_for_the_scheduler(
        db: Database, rp: RestorePoint, caplog: pytest.LogCaptureFixture) -> None:
    def broker_down(job_ids: list[str]) -> None:
        raise ConnectionError("redis is down")

    hand_over_after_commit(db.sessions, broker_down)
    with caplog.at_level(logging.WARNING), db.session() as session:
        job = submit(session, factory.delete(rp, max_attempts=3))
    assert [(j.id, j.status) for j in _jobs(db)] == [(job.id, JobStatus.QUEUED)]
    assert f"could not start jobs ['{job.id}'] now" in caplog.text


def test_a_session_outside_the_hand_over_writes_the_job_for_admission_to_find(
        db: Database, rp: RestorePoint) -> None:
    """A worker's and the scheduler's sessions have no hand-over: the row is all there
    is, and admission's next round starts it."""
    with db.session() as session:
        job = submit(session, factory.verify(rp, max_attempts=3, fraction=None))
    assert [(j.id, j.status, j.sent_at) for j in _jobs(db)] == [
        (job.id, JobStatus.QUEUED, None)]
