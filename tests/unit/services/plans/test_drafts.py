"""A plan being written: its rules in words, its next runs, and what its retention would keep
of the backups its own schedule makes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.errors import InvalidSchedule
from services.plans.drafts import PlanDraft, describe, preview
from services.plans.schemas import ScheduleRule
from services.records.plans import Retention, StoredRule
from services.settings import Settings
from services.status import RestorePointKind

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
SETTINGS = Settings(database_url="sqlite://", auth_strategy="noauth", environment="development")


@pytest.mark.parametrize(("cron", "words"), [
    ("0 2 * * *", "every day at 02:00"),
    ("30 23 * * 0", "every Sunday at 23:30"),
    ("0 3 * * 1,3,5", "every Monday, Wednesday and Friday at 03:00"),
    ("0 4 * * 7", "every Sunday at 04:00"),
    ("15 * * * *", "every hour at minute 15"),
    ("5 */6 * * *", "every 6 hours at minute 5"),
    ("0 1 15 * *", "on day 15 of every month at 01:00"),
    ("0 1 1-7 * 1", "at cron '0 1 1-7 * 1'"),
])
def test_cron_rules_read_as_words(cron: str, words: str) -> None:
    rule = StoredRule(kind=RestorePointKind.INCREMENTAL, cron=cron)
    assert describe(rule, "Europe/Berlin") == f"incremental {words} (Europe/Berlin)"


def test_rrules_read_as_words() -> None:
    rule = StoredRule(kind=RestorePointKind.FULL, timezone="UTC",
                      rrule="FREQ=WEEKLY;INTERVAL=2;BYDAY=SA,SU;BYHOUR=1;BYMINUTE=30")
    assert describe(rule, "Europe/Berlin") == (
        "full every 2 weeks on Sunday and Saturday at 01:30 (UTC)")


def test_a_daily_plan_with_gfs_retention_keeps_what_the_rules_say() -> None:
    shown = preview(PlanDraft(
        rules=[ScheduleRule(cron="0 2 * * *"),
               ScheduleRule(cron="0 2 * * 0", kind=RestorePointKind.FULL)],
        timezone="Europe/Berlin",
        retention=Retention(daily=7, weekly=4, monthly=12), count=3), SETTINGS, NOW)
    assert shown.rules == ["incremental every day at 02:00 (Europe/Berlin)",
                           "full every Sunday at 02:00 (Europe/Berlin)"]
    assert [r.local for r in shown.runs] == ["2026-11-26T02:00:00+01:00",
                                             "2026-11-27T02:00:00+01:00",
                                             "2026-11-28T02:00:00+01:00"]
    assert shown.runs[2].kind == RestorePointKind.INCREMENTAL
    assert shown.retention.days == 400
    assert shown.retention.made == 400
    # 7 days, 4 weeks (3 beyond the days' week), 12 months (11 beyond the first): 7 + 3 + 11
    # distinct restore points, give or take where the periods' newest ones coincide.
    kept = shown.retention.kept
    assert 18 <= len(kept) <= 22
    assert kept[0].kept_by[:2] == ["daily", "weekly"]
    assert all(k.kept_by for k in kept)
    assert [k.at for k in kept] == sorted((k.at for k in kept), reverse=True)
    monthly = [k for k in kept if "monthly" in k.kept_by]
    assert len(monthly) == 12


def test_an_hourly_plan_is_simulated_over_fewer_days() -> None:
    shown = preview(PlanDraft(rules=[ScheduleRule(cron="0 * * * *")],
                              retention=Retention(keep_last=5)), SETTINGS, NOW)
    assert shown.retention.days < 400
    assert shown.retention.made <= 3000
    assert len(shown.retention.kept) == 5


def test_a_draft_is_checked_as_a_save_is() -> None:
    with pytest.raises(InvalidSchedule):
        preview(PlanDraft(rules=[ScheduleRule(cron="61 2 * * *")]), SETTINGS, NOW)
    with pytest.raises(InvalidSchedule):
        preview(PlanDraft(rules=[ScheduleRule(cron="* * * * *")]), SETTINGS, NOW)
