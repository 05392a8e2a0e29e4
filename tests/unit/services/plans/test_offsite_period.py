"""The calendar periods a plan's off-site copies are made per, on the plan's wall clock."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from services.plans.offsite import period

BERLIN = ZoneInfo("Europe/Berlin")


def test_a_day_ends_at_midnight_on_the_plans_clock_not_in_utc() -> None:
    late = datetime(2026, 11, 22, 22, 30, tzinfo=UTC)  # 23:30 in Berlin, Sunday
    later = datetime(2026, 11, 22, 23, 30, tzinfo=UTC)  # 00:30 Monday in Berlin
    assert period(late, BERLIN, "day") != period(later, BERLIN, "day")
    assert period(late, ZoneInfo("UTC"), "day") == period(later, ZoneInfo("UTC"), "day")


def test_weeks_are_iso_weeks_across_the_new_year() -> None:
    # 2026-12-31 (Thursday) and 2027-01-03 (Sunday) are in ISO week 53 of 2026.
    assert period(datetime(2026, 12, 31, 12, tzinfo=UTC), BERLIN, "week") == \
        period(datetime(2027, 1, 3, 12, tzinfo=UTC), BERLIN, "week") == (2026, 53)
    assert period(datetime(2027, 1, 4, 12, tzinfo=UTC), BERLIN, "week") == (2027, 1)


def test_months_follow_the_wall_clock() -> None:
    assert period(datetime(2026, 10, 31, 23, 30, tzinfo=UTC), BERLIN, "month") == (2026, 11)
    assert period(datetime(2026, 10, 31, 22, 30, tzinfo=UTC), BERLIN, "month") == (2026, 10)
