"""A plan's stored rules and window as schedule objects, and its next slot."""

from __future__ import annotations

from datetime import datetime

from services.plans import schedule
from services.records.plans import Plan, StoredRule


def compile_rules(rules: list[StoredRule], default_tz: str) -> list[schedule.Rule]:
    return [schedule.compile_rule(rule.kind, rule.timezone or default_tz, cron_text=rule.cron,
                                  rrule_text=rule.rrule, start=rule.start, field=f"rules.{i}")
            for i, rule in enumerate(rules)]


def rules_of(plan: Plan) -> list[schedule.Rule]:
    return compile_rules(plan.rules, plan.timezone)


def window_of(plan: Plan) -> schedule.Window | None:
    return window(plan.window_start, plan.window_end, plan.timezone)


def window(start: str | None, end: str | None, timezone: str) -> schedule.Window | None:
    """A plan's stored window (its columns) as a schedule object; None when it has none."""
    if not start or not end:
        return None
    return schedule.Window(schedule.parse_clock(start, "window.start"),
                           schedule.parse_clock(end, "window.end"), schedule.zone(timezone))


def next_slot_after(plan: Plan, after: datetime) -> datetime | None:
    found = schedule.slots(rules_of(plan), after, count=1)
    return found[0].at if found else None
