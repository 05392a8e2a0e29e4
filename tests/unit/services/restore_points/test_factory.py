"""Every kind of restore point is made one way, and what it makes is a row both the ORM and
the bulk insert accept (on a real SQLite with the models' schema)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from services.db import Database
from services.jobs.inserts import insert_ignoring_conflicts
from services.records.groups import RestorePointGroup
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points import factory
from services.status import RestorePointKind, RestorePointStatus

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
TAKEN = NOW - timedelta(days=3)


def test_backups_and_copies_start_creating_holding_their_room(db: Database) -> None:
    with db.session() as session:
        session.add(Volume(id="v1", project_id="p", cluster="ceph-a", pool="volumes",
                           image="img", created_at=NOW))
        session.add(RestorePointGroup(**factory.group(project_id="p", plan_id="plan1",
                                                      now=TAKEN, group_id="g1")))
        source = RestorePoint(**{**factory.backup(
            project_id="p", volume_id="v1", target="local", kind=RestorePointKind.INCREMENTAL,
            room=1 << 30, plan_id="plan1", group_id="g1", now=TAKEN), "id": "src",
            "source_bootable": True})  # what the backup records when it starts
        on_demand = RestorePoint(**factory.backup(
            project_id="p", volume_id="v1", target="local", kind=RestorePointKind.FULL,
            room=5 << 20, now=NOW))
        session.add_all([source, on_demand])
        session.flush()
        copy = RestorePoint(**factory.copy(source, target="s3", room=2 << 30, plan_id="plan2"))
        session.add(copy)
    with db.session() as session:
        rows = {rp.id: rp for rp in session.scalars(select(RestorePoint))}
    made = [rows["src"], rows[on_demand.id], rows[copy.id]]
    assert [rp.status for rp in made] == [RestorePointStatus.CREATING] * 3
    assert [rp.quota_bytes for rp in made] == [1 << 30, 5 << 20, 2 << 30]
    assert (rows[on_demand.id].plan_id, rows[on_demand.id].group_id,
            rows[on_demand.id].created_at) == (None, None, NOW)
    # The copy holds its source's instant, whole, in its source's group, on its own plan.
    got = rows[copy.id]
    assert (got.target, got.kind, got.created_at, got.group_id, got.copied_from_restore_point_id,
            got.source_bootable, got.plan_id, got.volume_id, got.project_id) == (
        "s3", RestorePointKind.FULL, TAKEN, "g1", "src", True, "plan2", "v1", "p")


def test_a_restore_point_and_a_scheduled_runs_group_go_in_by_bulk_insert(
        db: Database) -> None:
    """As the planner writes the groups of the runs it plans: every replica derives the
    same id, and the second insert of it is dropped."""
    with db.session() as session:
        session.add(Volume(id="v1", project_id="p", cluster="ceph-a", pool="volumes",
                           image="img", created_at=NOW))
        session.flush()
        runs = [factory.group(project_id="p", plan_id="plan1", now=NOW, slot_at=NOW,
                              group_id="run-1") for _ in range(2)]
        insert_ignoring_conflicts(session, runs, RestorePointGroup)
        insert_ignoring_conflicts(session, [factory.backup(
            project_id="p", volume_id="v1", target="local", kind=RestorePointKind.FULL,
            room=0, group_id="run-1", now=NOW)], RestorePoint)
    with db.session() as session:
        group = session.scalars(select(RestorePointGroup)).one()
        rp = session.scalars(select(RestorePoint)).one()
    assert (group.id, group.slot_at, group.created_at, group.claimed_by) == (
        "run-1", NOW, NOW, None)
    assert (rp.status, rp.kind, rp.group_id, rp.created_at) == (
        RestorePointStatus.CREATING, RestorePointKind.FULL, "run-1", NOW)


def test_a_run_nows_group_gets_a_new_id_each_time() -> None:
    made = [factory.group(project_id="p", plan_id="plan1", now=NOW) for _ in range(2)]
    assert None not in (made[0]["id"], made[1]["id"])
    assert made[0]["id"] != made[1]["id"]
    assert made[0]["slot_at"] is None
