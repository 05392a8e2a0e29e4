"""A plan's schedule rules as it stores them, checked: shared by saving a plan and previewing
one being written."""

from __future__ import annotations

from datetime import datetime

from services.errors import InvalidSchedule
from services.plans import schedule, timing
from services.plans.schemas import ScheduleRule
from services.records.plans import StoredRule
from services.settings import Settings


def stored_rules(rules: list[ScheduleRule], plan_tz: str, now: datetime,
                 settings: Settings) -> list[StoredRule]:
    """The rules as a plan stores them, each checked as every save checks it (zones, the
    RRULE's start, the shortest interval between slots)."""
    stored = []
    for i, rule in enumerate(rules):
        start = None
        if rule.start is not None:
            # A start far back makes every evaluation walk from it; far ahead, it overflows.
            local_now = schedule.local_wall(now, schedule.zone(rule.timezone or plan_tz))
            earliest = local_now - settings.schedule_max_start_age
            start = rule.start.replace(tzinfo=None)
            if not earliest <= start <= local_now + schedule.HORIZON:
                raise InvalidSchedule(
                    f"rules.{i}.start must lie between {earliest.date().isoformat()} and "
                    f"{(local_now + schedule.HORIZON).date().isoformat()}; a rule's INTERVAL "
                    "counts from it, so a recent day in the same phase works the same",
                    field=f"rules.{i}.start")
        if rule.rrule is not None and rule.start is None:
            # Pin the start so INTERVAL counts from a fixed day, not from each evaluation.
            tz = schedule.zone(rule.timezone or plan_tz)
            start = schedule.local_wall(now, tz).replace(
                hour=0, minute=0, second=0, microsecond=0)
        elif rule.start is not None:
            start = rule.start.replace(tzinfo=None)
        stored.append(StoredRule(kind=rule.kind, cron=rule.cron, rrule=rule.rrule,
                                 timezone=rule.timezone, start=start))
    schedule.check_rules(timing.compile_rules(stored, plan_tz), now,
                         settings.schedule_min_interval)
    return stored
