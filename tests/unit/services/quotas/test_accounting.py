"""The storage quota's checks on rows (a real SQLite file): what a new restore point reserves
(what its chain's last one added, never what it inherited), when the quota refuses, and that
of several jobs raising their reservations only the raise that crosses the limit is refused.
What a restore point counts once committed is `test_chains.py`'s property."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.db import Database
from services.errors import QuotaExceeded
from services.quotas import service as quotas
from services.records.quotas import ProjectQuota
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RestorePointKind, RestorePointStatus

MiB = 1 << 20
GIB = 1 << 30
T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
PROJECT = "p1"
FULL, INC = RestorePointKind.FULL, RestorePointKind.INCREMENTAL


def _volume(db: Database, volume: str = "v1") -> None:
    with db.session() as session:
        if session.get(Volume, volume) is None:
            session.add(Volume(id=volume, project_id=PROJECT, cluster="ceph-a",
                               pool="volumes", image=f"img-{volume}", created_at=T0))


def _committed(db: Database, *points: tuple[RestorePointKind, int, int], target: str = "local",
               volume: str = "v1") -> list[str]:
    """Restore points (kind, what it added, what it counts now), one a day."""
    _volume(db, volume)
    with db.session() as session:
        rows = [RestorePoint(project_id=PROJECT, volume_id=volume, target=target, kind=kind,
                             status=RestorePointStatus.AVAILABLE, added_bytes=added,
                             quota_bytes=counts, created_at=T0 + timedelta(days=i),
                             completed_at=T0 + timedelta(days=i, hours=1))
                for i, (kind, added, counts) in enumerate(points)]
        session.add_all(rows)
        session.flush()
        return [r.id for r in rows]


def _creating(db: Database, reserved: int = 0, volume: str = "v1") -> str:
    _volume(db, volume)
    with db.session() as session:
        rp = RestorePoint(project_id=PROJECT, volume_id=volume, target="local",
                          status=RestorePointStatus.CREATING, quota_bytes=reserved)
        session.add(rp)
        session.flush()
        return rp.id


def _limit(db: Database, max_bytes: int | None, restore_points: int | None = None) -> None:
    with db.session() as session:
        quotas.set_limits(session, PROJECT, restore_points, max_bytes)


def _stored(db: Database) -> int:
    with db.session() as session:
        return quotas.usage(session, PROJECT).bytes_stored


def _reserve(db: Database, rp_id: str, held: int, *, exactly: bool = False) -> None:
    with db.session() as session:
        quotas.reserve(session, PROJECT, rp_id, held, exactly=exactly)


def test_the_next_backup_reserves_what_the_last_one_added_not_what_it_holds(
        db: Database) -> None:
    # The full was pruned: the first incremental holds the whole volume (80 MiB) now, but
    # it added 1 MiB, and so will the next one, about.
    _committed(db, (INC, MiB, 80 * MiB), (INC, 2 * MiB, 2 * MiB))
    with db.session() as session:
        assert quotas.estimate(session, "v1", "local", INC) == 2 * MiB
        assert quotas.estimate(session, "v1", "local", FULL) == 2 * MiB  # no full yet
        assert quotas.estimate(session, "v1", "s3", INC) == 0  # nothing known yet
        assert quotas.estimate(session, "v2", "local", FULL) == 0
    _committed(db, (FULL, 8 * MiB, 8 * MiB))
    with db.session() as session:
        assert quotas.estimate(session, "v1", "local", FULL) == 8 * MiB
        assert quotas.estimate(session, "v1", "local", INC) == 2 * MiB


def test_the_quota_refuses_what_would_not_fit(db: Database) -> None:
    _committed(db, (FULL, 8 * MiB, 8 * MiB))
    _limit(db, 10 * MiB)
    with db.session() as session:
        assert quotas.shortfall(session, PROJECT, 1, 2 * MiB) is None
        reason = quotas.shortfall(session, PROJECT, 1, 3 * MiB)
        assert reason is not None
        assert "storage quota of project 'p1' exceeded: 8.0 MiB of 10.0 MiB stored" in reason
        assert "this needs about 3.0 MiB more (1.0 MiB over)" in reason
    _limit(db, 8 * MiB)
    with db.session() as session:
        # Full: nothing more fits, not even a backup whose size nothing tells.
        assert quotas.shortfall(session, PROJECT, 1, 0) is not None


def test_only_the_raise_that_crosses_the_limit_is_refused(db: Database) -> None:
    # 90 of 100 used, four jobs of 3 each: three fit, and they all go on.
    _committed(db, (FULL, 90 * MiB, 90 * MiB))
    _limit(db, 100 * MiB)
    jobs = [_creating(db) for _ in range(4)]
    for held in (1, 2):
        for rp_id in jobs:
            _reserve(db, rp_id, held * MiB)
    assert _stored(db) == 98 * MiB
    _reserve(db, jobs[0], 3 * MiB)
    with pytest.raises(QuotaExceeded) as refused:
        _reserve(db, jobs[1], 4 * MiB)  # 2 more, where 1 fits
    assert "(1.0 MiB over)" in refused.value.message, refused.value.message
    assert _stored(db) == 99 * MiB  # the refused raise changed nothing
    # That job stops and its reservation goes; the others finish within the limit.
    with db.session() as session:
        session.get(RestorePoint, jobs[1]).status = RestorePointStatus.DELETED  # type: ignore[union-attr]
    _reserve(db, jobs[2], 3 * MiB)
    _reserve(db, jobs[3], 3 * MiB)
    assert _stored(db) == 99 * MiB


def test_a_reservation_grows_while_written_and_is_set_at_the_end(db: Database) -> None:
    rp_id = _creating(db, MiB)
    _limit(db, 10 * MiB)
    _reserve(db, rp_id, 4 * MiB)
    _reserve(db, rp_id, 2 * MiB)  # never lowered while it is written
    assert _stored(db) == 4 * MiB
    with pytest.raises(QuotaExceeded):
        _reserve(db, rp_id, 11 * MiB, exactly=True)
    _reserve(db, rp_id, 3 * MiB, exactly=True)  # its final figure
    assert _stored(db) == 3 * MiB


def test_a_commit_that_grows_the_figure_past_the_limit_is_refused(db: Database) -> None:
    _committed(db, (FULL, 8 * MiB, 8 * MiB))
    _limit(db, 10 * MiB)
    rp_id = _creating(db)

    def commit() -> None:
        with db.session() as session:
            session.get(RestorePoint, rp_id).quota_bytes = 3 * MiB  # type: ignore[union-attr]
            session.flush()
            quotas.admit(session, PROJECT, 3 * MiB)

    with pytest.raises(QuotaExceeded):
        commit()
    assert _stored(db) == 8 * MiB
    with db.session() as session:  # a change that grows nothing is always admitted
        quotas.admit(session, PROJECT, 0)


def test_the_limit_is_kept_in_whole_gib_for_the_release_before(db: Database) -> None:
    _limit(db, GIB // 2)
    with db.session() as session:
        quota = session.get(ProjectQuota, PROJECT)
        assert quota is not None
        assert (quota.max_bytes, quota.gigabytes) == (GIB // 2, 1)
    _limit(db, 3 * GIB)
    with db.session() as session:
        assert session.get(ProjectQuota, PROJECT).gigabytes == 3  # type: ignore[union-attr]
    _limit(db, None)
    with db.session() as session:
        assert session.get(ProjectQuota, PROJECT).gigabytes is None  # type: ignore[union-attr]


def test_restore_points_of_the_release_before_count_their_bytes_copied(db: Database) -> None:
    _volume(db)
    with db.session() as session:
        session.add(RestorePoint(project_id=PROJECT, volume_id="v1", target="local",
                                 status=RestorePointStatus.AVAILABLE, bytes_copied=5 * MiB,
                                 completed_at=T0))
    assert _stored(db) == 5 * MiB
