"""The calendar's days: restore points counted on the user's own dates, right at local
midnight in zones whose offset is not whole hours and across a change of daylight time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from services.restore_points.calendar import per_day


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_counts_fall_on_the_local_date_at_a_quarter_hour_offset() -> None:
    # Kathmandu is UTC+05:45: its midnight is 18:15 UTC.
    rows = [(at("2026-11-24T18:14:59"), "full"), (at("2026-11-24T18:15:00"), "incremental"),
            (at("2026-11-24T18:29:00"), "incremental")]
    days = per_day(rows, ZoneInfo("Asia/Kathmandu"))
    assert [(d.date, d.full, d.incremental) for d in days] == [
        ("2026-11-24", 1, 0), ("2026-11-25", 0, 2)]


def test_counts_follow_a_change_of_daylight_time() -> None:
    # Berlin moves from UTC+1 to UTC+2 at 01:00 UTC on 2026-03-29; its midnights are
    # 23:00 UTC before and 22:00 UTC after.
    rows = [(at("2026-03-28T22:59:00"), "full"), (at("2026-03-28T23:00:00"), "incremental"),
            (at("2026-03-29T21:59:00"), "incremental"), (at("2026-03-29T22:00:00"), "full")]
    days = per_day(rows, ZoneInfo("Europe/Berlin"))
    assert [(d.date, d.full, d.incremental) for d in days] == [
        ("2026-03-28", 1, 0), ("2026-03-29", 0, 2), ("2026-03-30", 1, 0)]


def test_every_restore_point_of_a_busy_span_is_counted_once() -> None:
    start = at("2026-01-01T00:00:00")
    rows = [(start + timedelta(minutes=7 * i), "incremental") for i in range(5000)]
    days = per_day(rows, ZoneInfo("America/St_Johns"))  # UTC-03:30
    assert sum(d.incremental for d in days) == 5000
    expected: dict[str, int] = {}
    for created_at, _ in rows:
        date = created_at.astimezone(ZoneInfo("America/St_Johns")).date().isoformat()
        expected[date] = expected.get(date, 0) + 1
    assert {d.date: d.incremental for d in days} == expected
