"""The restore point calendar on both databases: PostgreSQL groups the days itself, SQLite's
rows are counted in Python, and both give the user's own dates right at local midnight, in
zones whose offset is not whole hours and across a change of daylight time."""

from __future__ import annotations

import shutil
import uuid
import zoneinfo
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, insert, select

from services.context import RequestContext
from services.db import Database
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points.calendar import calendar
from services.status import RestorePointKind, RestorePointStatus

# PostgreSQL counts the days in SQL, SQLite in Python: both are under test.
pytestmark = pytest.mark.both_databases

PROJECT = "calendar-project"
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def db(fresh_database_url: str) -> Iterator[Database]:
    database = Database(fresh_database_url)
    yield database
    database.dispose()


def add_volume(db: Database, project: str = PROJECT) -> str:
    volume_id = str(uuid.uuid4())
    with db.session() as session:
        session.execute(insert(Volume), [{
            "id": volume_id, "project_id": project, "cluster": "ceph-a", "pool": "volumes",
            "image": f"calendar-{volume_id}", "created_at": NOW - timedelta(days=900)}])
    return volume_id


def add_points(db: Database, volume_id: str, made: Sequence[tuple[datetime, str]],
               status: RestorePointStatus = RestorePointStatus.AVAILABLE,
               project: str = PROJECT) -> None:
    with db.session() as session:
        session.execute(insert(RestorePoint), [{
            "id": str(uuid.uuid4()), "project_id": project, "volume_id": volume_id,
            "target": "local", "kind": kind, "status": status, "size_bytes": 1 << 20,
            "bytes_copied": 1 << 20, "duration_seconds": 1.0, "created_at": created_at,
            "completed_at": created_at} for created_at, kind in made])


def days(db: Database, volume_id: str, zone: str, span: int = 900,
         ctx: RequestContext | None = None) -> list[tuple[str, int, int]]:
    with db.reading() as session:
        answer = calendar(session, ctx or RequestContext(project_id=PROJECT), volume_id,
                          zone, span, NOW)
    return [(d.date, d.full, d.incremental) for d in answer.days]


def test_a_quarter_hour_offset_splits_the_days_at_local_midnight(db: Database) -> None:
    volume = add_volume(db)
    # Kathmandu is UTC+05:45: its midnight is 18:15 UTC.
    add_points(db, volume, [(at("2026-11-24T18:14:59"), RestorePointKind.FULL),
                            (at("2026-11-24T18:15:00"), RestorePointKind.INCREMENTAL),
                            (at("2026-11-24T18:29:00"), RestorePointKind.INCREMENTAL)])
    assert days(db, volume, "Asia/Kathmandu") == [("2026-11-24", 1, 0), ("2026-11-25", 0, 2)]
    # The same instants are all on the 24th in UTC.
    assert days(db, volume, "UTC") == [("2026-11-24", 1, 2)]


def test_a_change_of_daylight_time_moves_midnight(db: Database) -> None:
    volume = add_volume(db)
    # Berlin moves from UTC+1 to UTC+2 at 01:00 UTC on 2026-03-29; its midnights are
    # 23:00 UTC before and 22:00 UTC after.
    add_points(db, volume, [(at("2026-03-28T22:59:00"), RestorePointKind.FULL),
                            (at("2026-03-28T23:00:00"), RestorePointKind.INCREMENTAL),
                            (at("2026-03-29T21:59:00"), RestorePointKind.INCREMENTAL),
                            (at("2026-03-29T22:00:00"), RestorePointKind.FULL)])
    assert days(db, volume, "Europe/Berlin") == [
        ("2026-03-28", 1, 0), ("2026-03-29", 0, 2), ("2026-03-30", 1, 0)]


def test_only_the_volumes_available_points_of_the_span_and_project_are_counted(
        db: Database) -> None:
    volume, other = add_volume(db), add_volume(db)
    add_points(db, volume, [(at("2026-11-25T10:00:00"), RestorePointKind.FULL)])
    add_points(db, volume, [(at("2026-11-25T11:00:00"), RestorePointKind.INCREMENTAL)],
               status=RestorePointStatus.DELETING)
    add_points(db, volume, [(at("2026-11-20T11:00:00"), RestorePointKind.INCREMENTAL)])
    add_points(db, other, [(at("2026-11-25T12:00:00"), RestorePointKind.INCREMENTAL)])
    # Three days back from the 26th: the 20th is before the span.
    assert days(db, volume, "UTC", span=3) == [("2026-11-25", 1, 0)]
    assert days(db, volume, "UTC", span=3,
                ctx=RequestContext(project_id="someone-else")) == []
    assert days(db, volume, "UTC", span=3,
                ctx=RequestContext(project_id="someone-else", cloud_admin=True)) == [
        ("2026-11-25", 1, 0)]


def test_a_busy_span_counts_every_restore_point_once_on_its_local_date(db: Database) -> None:
    volume = add_volume(db)
    start = at("2026-08-01T00:00:00")
    made = [(start + timedelta(minutes=37 * i),
             RestorePointKind.FULL if i % 9 == 0 else RestorePointKind.INCREMENTAL)
            for i in range(4000)]
    add_points(db, volume, made)
    zone = ZoneInfo("America/St_Johns")  # UTC-03:30, and daylight time ends on 2026-11-01
    expected: dict[str, list[int]] = {}
    for created_at, kind in made:
        day = expected.setdefault(created_at.astimezone(zone).date().isoformat(), [0, 0])
        day[0 if kind == RestorePointKind.FULL else 1] += 1
    assert days(db, volume, "America/St_Johns") == [
        (date, full, incremental) for date, (full, incremental) in sorted(expected.items())]


@pytest.fixture
def zone_only_python_knows(tmp_path: Path) -> Iterator[str]:
    """A zone name the API's zoneinfo finds and the database server's tzdata lacks (as when
    the two hosts' tzdata differ): Kathmandu's rules under a name of the test's own."""
    (tmp_path / "Cairn").mkdir()
    shutil.copy(Path(zoneinfo.TZPATH[0]) / "Asia" / "Kathmandu", tmp_path / "Cairn" / "Testzone")
    zoneinfo.reset_tzpath(to=[str(tmp_path), *zoneinfo.TZPATH])
    yield "Cairn/Testzone"
    zoneinfo.reset_tzpath()
    ZoneInfo.clear_cache()


def test_a_zone_the_database_does_not_know_is_counted_in_python(
        db: Database, zone_only_python_knows: str) -> None:
    volume = add_volume(db)
    add_points(db, volume, [(at("2026-11-24T18:14:59"), RestorePointKind.FULL),
                            (at("2026-11-24T18:15:00"), RestorePointKind.INCREMENTAL)])
    with db.session() as session:  # the API's unit of work: it must stay usable after
        answer = calendar(session, RequestContext(project_id=PROJECT), volume,
                          zone_only_python_knows, 900, NOW)
        assert session.scalar(select(func.count()).select_from(RestorePoint)) == 2
    assert [(d.date, d.full, d.incremental) for d in answer.days] == [
        ("2026-11-24", 1, 0), ("2026-11-25", 0, 1)]
