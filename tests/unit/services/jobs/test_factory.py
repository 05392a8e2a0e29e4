"""Every kind of job is made one way, and what it makes is a row both the ORM and the bulk
insert accept (on a real SQLite with the models' schema)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from services.db import Database
from services.jobs import factory
from services.jobs.inserts import insert_ignoring_conflicts
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import (
    JobKind,
    JobStatus,
    RestoreMethod,
    RestoreMode,
    RestorePointKind,
)

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _rp(session: object) -> RestorePoint:
    volume = Volume(id="v1", project_id="p", cluster="ceph-a", pool="volumes", image="img",
                    created_at=NOW)
    rp = RestorePoint(id="rp1", project_id="p", volume_id="v1", target="local",
                      kind=RestorePointKind.FULL, created_at=NOW)
    session.add_all([volume, rp])  # type: ignore[attr-defined]
    return rp


def test_each_kind_makes_a_row_the_orm_takes(db: Database) -> None:
    with db.session() as session:
        rp = _rp(session)
        session.flush()
        qos = factory.Qos(bytes_per_second=1 << 20)
        made = [
            factory.backup(project_id="p", volume_id="v1", target="local",
                           kind=RestorePointKind.INCREMENTAL, restore_point_id="rp1",
                           max_attempts=5, qos=qos, now=NOW),
            factory.restore(rp, factory.NewImage("ceph-a/volumes/back"), max_attempts=5,
                            qos=qos),
            factory.delete(rp, max_attempts=5),
            factory.verify(rp, max_attempts=5, fraction=0.05),
            factory.prune(project_id="p", plan_id="plan1", max_attempts=5, now=NOW),
            factory.copy(rp, max_attempts=5, qos=qos, plan_id="plan1", now=NOW),
        ]
        session.add_all([Job(**values) for values in made])
    with db.session() as session:
        jobs = {j.kind: j for j in session.scalars(select(Job))}
    assert set(jobs) == set(JobKind)
    assert all(j.status == JobStatus.QUEUED and j.max_attempts == 5 for j in jobs.values())
    assert jobs[JobKind.BACKUP].qos_bytes_per_second == 1 << 20
    assert jobs[JobKind.RESTORE].target == "local"
    assert jobs[JobKind.VERIFY].verify_fraction == 0.05
    assert jobs[JobKind.DELETE].qos_bytes_per_second is None


def test_bulk_rows_keep_one_waiting_prune_per_plan_and_record_ended_slots(
        db: Database) -> None:
    with db.session() as session:
        _rp(session)
        session.flush()
        skipped = factory.ended(
            factory.backup(project_id="p", volume_id="v1", target="local",
                           kind=RestorePointKind.FULL, plan_id="plan1", slot_at=NOW,
                           max_attempts=3, now=NOW),
            JobStatus.SKIPPED, "misfire", "missed")
        prunes = [factory.prune(project_id="p", plan_id="plan1", max_attempts=3, now=NOW)
                  for _ in range(3)]
        insert_ignoring_conflicts(session, [skipped, *prunes])
    with db.session() as session:
        assert session.scalar(select(func.count()).where(Job.kind == JobKind.PRUNE)) == 1
        ended = session.scalars(select(Job).where(Job.kind == JobKind.BACKUP)).one()
    assert (ended.status, ended.error_code, ended.finished_at) == (
        JobStatus.SKIPPED, "misfire", NOW)


@pytest.mark.parametrize(("into", "expected"), [
    (factory.NewImage("ceph-a/volumes/back"),
     ("ceph-a/volumes/back", None, None, RestoreMethod.COPY, None)),
    (factory.NewImage("ceph-a/volumes/back", RestoreMethod.INSTANT),
     ("ceph-a/volumes/back", None, None, RestoreMethod.INSTANT, None)),
    (factory.NewVolume("vol-9", "ceph-a/volumes/volume-vol-9"),
     ("ceph-a/volumes/volume-vol-9", RestoreMode.NEW_VOLUME, "vol-9", RestoreMethod.COPY,
      None)),
    (factory.InPlace("vol-9", "ceph-a/volumes/volume-vol-9"),
     ("ceph-a/volumes/volume-vol-9", RestoreMode.IN_PLACE, "vol-9", RestoreMethod.COPY,
      None)),
    (factory.HeldByCinderBackup("vol-9", "ceph-a/volumes/volume-vol-9"),
     ("ceph-a/volumes/volume-vol-9", RestoreMode.CINDER_BACKUP, "vol-9", RestoreMethod.COPY,
      None)),
    (factory.AdoptedVolume("ceph-a/volumes/cairn-instant-job-7", '{"name": "back"}'),
     ("ceph-a/volumes/cairn-instant-job-7", RestoreMode.NEW_VOLUME, None,
      RestoreMethod.INSTANT, '{"name": "back"}')),
], ids=["image", "image-instant", "new-volume", "in-place", "cinder-backup",
        "adopted-volume"])
def test_a_restore_is_made_whole_from_its_destination(
        db: Database, into: factory.RestoreDestination,
        expected: tuple[object, ...]) -> None:
    """What the worker reads to know where to write is on the row as made: nothing is set
    on a restore job after the factory, also when it goes in by a bulk insert."""
    with db.session() as session:
        rp = _rp(session)
        session.flush()
        values = factory.restore(rp, into, job_id="job-7", max_attempts=3)
        insert_ignoring_conflicts(session, [values])
    with db.session() as session:
        job = session.get_one(Job, "job-7")
    assert (job.kind, job.status, job.restore_point_id, job.volume_id, job.target) == (
        JobKind.RESTORE, JobStatus.QUEUED, "rp1", "v1", "local")
    assert (job.restore_target, job.restore_mode, job.restore_cinder_volume_id,
            job.restore_method, job.restore_volume_spec) == expected


def test_a_restore_without_a_named_id_gets_a_new_one() -> None:
    rp = RestorePoint(id="rp1", project_id="p", volume_id="v1", target="local")
    into = factory.NewImage("ceph-a/volumes/back")
    first, second = (factory.restore(rp, into, max_attempts=3) for _ in range(2))
    assert None not in (first["id"], second["id"])
    assert first["id"] != second["id"]


def test_a_field_no_job_has_is_refused() -> None:
    with pytest.raises(TypeError, match="not a job field: \\['colour'\\]"):
        factory._row(JobKind.PRUNE, "p", 3, factory.NO_QOS, NOW, colour="red")
