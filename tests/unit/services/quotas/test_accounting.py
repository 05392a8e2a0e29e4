"""The storage quota's accounting on rows (a real SQLite file): what a new restore point
reserves, when the quota refuses, and where a deleted restore point's bytes go, so that
deleting the full under a chain of incrementals frees nothing of the quota that the
target still holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.db import Database
from services.quotas import service as quotas
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RestorePointKind, RestorePointStatus

MiB = 1 << 20
T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
PROJECT = "p1"


def _chain(db: Database, *points: tuple[RestorePointKind, int], size: int = 10 * MiB,
           target: str = "local", volume: str = "v1") -> list[str]:
    with db.session() as session:
        if session.get(Volume, volume) is None:
            session.add(Volume(id=volume, project_id=PROJECT, cluster="ceph-a",
                               pool="volumes", image=f"img-{volume}", created_at=T0))
            session.flush()
        rows = [RestorePoint(project_id=PROJECT, volume_id=volume, target=target, kind=kind,
                             status=RestorePointStatus.AVAILABLE, size_bytes=size,
                             bytes_copied=added, quota_bytes=added,
                             created_at=T0 + timedelta(days=i))
                for i, (kind, added) in enumerate(points)]
        session.add_all(rows)
        session.flush()
        return [r.id for r in rows]


def _delete(db: Database, rp_id: str) -> None:
    with db.session() as session:
        rp = session.get(RestorePoint, rp_id)
        assert rp is not None
        quotas.pass_on(session, rp)
        rp.status = RestorePointStatus.DELETED


def _held(db: Database, *ids: str) -> list[int]:
    with db.session() as session:
        return [int(session.get(RestorePoint, i).quota_bytes or 0)  # type: ignore[union-attr]
                for i in ids]


def _stored(db: Database) -> int:
    with db.session() as session:
        return quotas.usage(session, PROJECT).bytes_stored


FULL, INC = RestorePointKind.FULL, RestorePointKind.INCREMENTAL


def test_deleting_the_full_under_incrementals_moves_its_bytes_to_the_next(db: Database) -> None:
    full, inc1, inc2 = _chain(db, (FULL, 8 * MiB), (INC, MiB), (INC, MiB))
    assert _stored(db) == 10 * MiB
    _delete(db, full)
    # inc1 now holds the full's data on the target: the quota still counts it.
    assert _held(db, inc1, inc2) == [9 * MiB, MiB]
    assert _stored(db) == 10 * MiB


def test_a_restore_point_never_counts_more_than_its_volume(db: Database) -> None:
    # A week of incrementals each rewriting the same 4 MiB, the oldest pruned daily: the
    # oldest holds at most a whole image, so the count stays near what the target holds.
    ids = _chain(db, (FULL, 10 * MiB), *[(INC, 4 * MiB)] * 10)
    for rp_id in ids[:4]:
        _delete(db, rp_id)
    assert _held(db, ids[4])[0] == 10 * MiB  # capped at its volume's size
    assert _stored(db) == 10 * MiB + 6 * 4 * MiB


def test_the_newest_hands_its_bytes_back_once_and_the_last_takes_them_away(
        db: Database) -> None:
    full, inc = _chain(db, (FULL, 8 * MiB), (INC, 2 * MiB))
    _delete(db, inc)   # an RBD backup image's head keeps its data until the next backup
    assert _held(db, full) == [10 * MiB]
    _delete(db, full)  # the chain is gone from the target
    assert _stored(db) == 0


def test_chains_are_per_volume_and_target(db: Database) -> None:
    [here] = _chain(db, (FULL, 5 * MiB))
    [offsite] = _chain(db, (FULL, 3 * MiB), target="s3")
    [other] = _chain(db, (FULL, 2 * MiB), volume="v2")
    _delete(db, here)
    assert _held(db, offsite, other) == [3 * MiB, 2 * MiB]
    assert _stored(db) == 5 * MiB


def test_a_new_restore_point_reserves_what_its_chain_added_last(db: Database) -> None:
    _chain(db, (FULL, 8 * MiB), (INC, MiB), (INC, 2 * MiB))
    with db.session() as session:
        assert quotas.estimate(session, "v1", "local", INC) == 2 * MiB
        assert quotas.estimate(session, "v1", "local", FULL) == 8 * MiB
        assert quotas.estimate(session, "v1", "s3", INC) == 0  # nothing known yet
        assert quotas.estimate(session, "v2", "local", FULL) == 0


def test_the_quota_refuses_what_would_not_fit(db: Database) -> None:
    _chain(db, (FULL, 8 * MiB))
    with db.session() as session:
        quotas.set_limits(session, PROJECT, None, 10 * MiB)
    with db.session() as session:
        assert quotas.shortfall(session, PROJECT, 1, 2 * MiB) is None
        reason = quotas.shortfall(session, PROJECT, 1, 3 * MiB)
        assert reason is not None
        assert "storage quota of project 'p1' exceeded: 8.0 MiB of 10.0 MiB stored" in reason
        assert "this needs about 3.0 MiB more (1.0 MiB over)" in reason
        quotas.set_limits(session, PROJECT, None, 8 * MiB)
    with db.session() as session:
        # Full: nothing more fits, not even a backup whose size nothing tells.
        assert quotas.shortfall(session, PROJECT, 1, 0) is not None


def test_a_reservation_grows_and_counts_until_settled(db: Database) -> None:
    with db.session() as session:
        session.add(Volume(id="v1", project_id=PROJECT, cluster="ceph-a", pool="volumes",
                           image="img-v1", created_at=T0))
        quotas.set_limits(session, PROJECT, None, 10 * MiB)
        rp = RestorePoint(project_id=PROJECT, volume_id="v1", target="local",
                          status=RestorePointStatus.CREATING, quota_bytes=MiB)
        session.add(rp)
        session.flush()
        rp_id = rp.id
    with db.session() as session:
        quotas.reserve(session, rp_id, 4 * MiB)
        quotas.reserve(session, rp_id, 2 * MiB)  # never lowered while it is written
    assert _held(db, rp_id) == [4 * MiB]
    with db.session() as session:
        assert quotas.excess(session, PROJECT) is None
        quotas.reserve(session, rp_id, 11 * MiB)
    with db.session() as session:
        assert "11.0 MiB of 10.0 MiB stored (1.0 MiB over)" in (
            quotas.excess(session, PROJECT) or "")
        quotas.reserve(session, rp_id, 3 * MiB, exactly=True)  # its final figure
    assert _held(db, rp_id) == [3 * MiB]
