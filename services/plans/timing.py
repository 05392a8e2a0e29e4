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
    if not plan.window_start or not plan.window_end:
        return None
    return schedule.Window(schedule.parse_clock(plan.window_start, "window.start"),
                           schedule.parse_clock(plan.window_end, "window.end"),
                           schedule.zone(plan.timezone))


def next_slot_after(plan: Plan, after: datetime) -> datetime | None:
    found = schedule.slots(rules_of(plan), after, count=1)
    return found[0].at if found else None
