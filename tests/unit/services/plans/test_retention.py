"""Retention on a simulated 400-day history (daily incrementals, weekly fulls) under keep
daily 7 / weekly 4 / monthly 12 / yearly 3: exactly the restore points the documented rule
names are kept."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from services.plans.retention import Point, Policy, evaluate

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def history(days: int = 400, last: date = date(2026, 11, 20)) -> list[Point]:
    """One restore point a day at 02:00 Berlin time (the Sunday ones are fulls; the kind
    does not matter to retention: every restore point is complete on its own)."""
    points = []
    for i in range(days):
        day = last - timedelta(days=i)
        at = datetime(day.year, day.month, day.day, 2, 0, tzinfo=BERLIN).astimezone(UTC)
        points.append(Point(id=day.isoformat(), created_at=at))
    return points


def kept(points: list[Point], policy: Policy, now: datetime = NOW) -> dict[str, list[str]]:
    return {v.point.id: v.kept_by for v in evaluate(points, policy, BERLIN, now) if v.keep}


def test_gfs_over_400_days_keeps_exactly_the_documented_restore_points() -> None:
    result = kept(history(), Policy(daily=7, weekly=4, monthly=12, yearly=3))
    assert sorted(result, reverse=True) == [
        # daily: the 7 newest days
        "2026-11-20", "2026-11-19", "2026-11-18", "2026-11-17", "2026-11-16", "2026-11-15",
        "2026-11-14",
        # weekly: the newest of each ISO week (Mon-Sun); 11-20 and 11-15 are already daily
        "2026-11-08", "2026-11-01",
        # monthly: the last backup of each month (Nov 2026 is 11-20, already kept)
        "2026-10-31", "2026-09-30", "2026-08-31", "2026-07-31", "2026-06-30", "2026-05-31",
        "2026-04-30", "2026-03-31", "2026-02-28", "2026-01-31",
        # monthly and yearly: the last backup of 2025 (2026's is 11-20; there is no 2024)
        "2025-12-31",
    ]
    assert result["2026-11-20"] == ["daily", "weekly", "monthly", "yearly", "newest"]
    assert result["2026-11-15"] == ["daily", "weekly"]
    assert result["2025-12-31"] == ["monthly", "yearly"]
    assert "2025-11-30" not in result  # the 13th month back is pruned


def test_keep_last_days_without_backups_and_the_newest_always_stays() -> None:
    points = [p for p in history(30) if p.id not in {"2026-11-18", "2026-11-17"}]
    # Days without a backup do not use up the daily budget.
    assert sorted(kept(points, Policy(daily=3))) == ["2026-11-16", "2026-11-19", "2026-11-20"]
    assert sorted(kept(points, Policy(keep_last=2))) == ["2026-11-19", "2026-11-20"]


def test_locked_and_in_use_restore_points_are_never_pruned() -> None:
    points = history(10)
    points[5] = Point(points[5].id, points[5].created_at, locked_until=NOW + timedelta(days=1))
    points[6] = Point(points[6].id, points[6].created_at, in_use=True)
    points[7] = Point(points[7].id, points[7].created_at, locked_until=NOW - timedelta(days=1))
    result = kept(points, Policy(keep_last=1))
    assert result == {"2026-11-20": ["last", "newest"], "2026-11-15": ["locked"],
                      "2026-11-14": ["in use"]}


def test_a_policy_of_zeros_keeps_everything() -> None:
    assert len(kept(history(20), Policy())) == 20
