"""What a plan being written would do, before it is saved: its next runs, a sentence for each
rule, and what its retention would keep of the backups its own schedule makes (simulated
over the past, as Proxmox Backup Server's prune simulator does). The portal's editor shows
them as the user types; every rule is checked exactly as a save checks it."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field

from services.formats import FreeText
from services.plans import schedule, timing
from services.plans.retention import Point, evaluate
from services.plans.rules import stored_rules
from services.plans.schemas import (
    BackupWindow,
    NextRun,
    RetentionItem,
    ScheduleRule,
    policy_of,
)
from services.records.plans import Plan, Retention, StoredRule
from services.settings import Settings
from services.status import RestorePointKind

SIMULATED_DAYS = 400
"""Enough for 12 monthly restore points and the week around them."""
MAX_SIMULATED = 3000
"""Slots evaluated at most: an hourly schedule is simulated over fewer days."""
MAX_EXISTING_SHOWN = 500
_WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_RRULE_DAYS = {"SU": 0, "MO": 1, "TU": 2, "WE": 3, "TH": 4, "FR": 5, "SA": 6}


class PlanDraft(BaseModel):
    rules: list[ScheduleRule] = Field(min_length=1, max_length=20)
    timezone: FreeText = Field(default="UTC", max_length=64, examples=["Europe/Berlin"])
    window: BackupWindow | None = None
    retention: Retention = Field(default_factory=Retention)
    count: int = Field(default=10, ge=1, le=100, description="Next runs to list")
    plan_id: FreeText | None = Field(
        default=None, max_length=64,
        description="The plan this draft edits: its restore points are then judged by the "
                    "draft's retention and timezone, as the first prune after saving would")


class SimulatedPoint(BaseModel):
    at: datetime
    local_date: str
    kind: RestorePointKind
    kept_by: list[str]


class RetentionSimulation(BaseModel):
    days: int = Field(description="The simulated span: backups at every slot of the last "
                                  "`days` days")
    made: int = Field(description="Backups the schedule made in that span")
    kept: list[SimulatedPoint] = Field(description="Those the retention keeps, newest first, "
                                                   "with the rules keeping each")


class ExistingVerdicts(BaseModel):
    kept: int
    pruned: int = Field(description="Restore points the first prune after saving would delete")
    restore_points: list[RetentionItem] = Field(
        description=f"Each restore point kept (and by which rules) or pruned, newest first; "
                    f"the newest {MAX_EXISTING_SHOWN} at most")


class DraftPreview(BaseModel):
    rules: list[str] = Field(description="Each rule in words, in the order given")
    runs: list[NextRun]
    retention: RetentionSimulation
    existing: ExistingVerdicts | None = Field(
        default=None, description="With `plan_id`: the plan's restore points under the draft")


def preview(draft: PlanDraft, settings: Settings, now: datetime) -> DraftPreview:
    stored = stored_rules(draft.rules, draft.timezone, now, settings)
    plan = Plan(timezone=draft.timezone, rules=stored,
                window_start=draft.window.start if draft.window else None,
                window_end=draft.window.end if draft.window else None)
    window = timing.window_of(plan)
    rules = timing.rules_of(plan)
    tz = schedule.zone(draft.timezone)
    runs = [NextRun(at=slot.at, local=slot.at.astimezone(tz).isoformat(),
                    timezone=draft.timezone, kind=slot.kind,
                    starts_at=window.next_open(slot.at) if window else slot.at)
            for slot in schedule.slots(rules, now, count=draft.count)]
    return DraftPreview(rules=[describe(rule, draft.timezone) for rule in stored], runs=runs,
                        retention=_simulate(rules, draft.retention, tz, now))


def _simulate(rules: list[schedule.Rule], retention: Retention, tz: ZoneInfo,
              now: datetime) -> RetentionSimulation:
    per_day = len(schedule.slots(rules, now - timedelta(days=7), until=now)) / 7
    days = SIMULATED_DAYS if per_day * SIMULATED_DAYS <= MAX_SIMULATED else max(
        1, int(MAX_SIMULATED / max(per_day, 1)))
    made = schedule.slots(rules, now - timedelta(days=days), until=now, count=MAX_SIMULATED)
    points = {str(i): slot for i, slot in enumerate(made)}
    verdicts = evaluate([Point(i, slot.at) for i, slot in points.items()],
                        policy_of(retention), tz, now)
    kept = [SimulatedPoint(at=points[v.point.id].at,
                           local_date=points[v.point.id].at.astimezone(tz).date().isoformat(),
                           kind=points[v.point.id].kind, kept_by=v.kept_by)
            for v in verdicts if v.keep]
    return RetentionSimulation(days=days, made=len(made), kept=kept)


def describe(rule: StoredRule, plan_tz: str) -> str:
    """The rule in words ("incremental every day at 02:00 (Europe/Berlin)"); the cron line
    or RRULE itself when it is not one of the common shapes."""
    tz = rule.timezone or plan_tz
    when = _cron_words(rule.cron) if rule.cron is not None else _rrule_words(rule.rrule or "")
    return f"{rule.kind.value} {when} ({tz})"


def _cron_words(text: str) -> str:
    fields = text.split()
    if len(fields) != 5:
        return f"at cron {text!r}"
    minute, hour, dom, month, dow = fields
    if not minute.isdigit():
        return f"at cron {text!r}"
    if hour == "*" and dom == month == dow == "*":
        return f"every hour at minute {int(minute)}"
    if hour.startswith("*/") and hour[2:].isdigit() and dom == month == dow == "*":
        return f"every {int(hour[2:])} hours at minute {int(minute)}"
    if not hour.isdigit() or month != "*":
        return f"at cron {text!r}"
    at = f"at {int(hour):02d}:{int(minute):02d}"
    if dom == "*" and dow == "*":
        return f"every day {at}"
    if dom == "*" and all(d.isdigit() and int(d) <= 7 for d in dow.split(",")):
        return f"every {_days([int(d) % 7 for d in dow.split(',')])} {at}"
    if dow == "*" and dom.isdigit():
        return f"on day {int(dom)} of every month {at}"
    return f"at cron {text!r}"


def _rrule_words(text: str) -> str:
    parts = dict(p.split("=", 1) for p in text.upper().split(";") if "=" in p)
    freq = parts.get("FREQ", "")
    interval = int(parts["INTERVAL"]) if parts.get("INTERVAL", "").isdigit() else 1
    hours, minutes = parts.get("BYHOUR", ""), parts.get("BYMINUTE", "0")
    at = (f" at {int(hours):02d}:{int(minutes):02d}"
          if hours.isdigit() and minutes.isdigit() else "")
    unit = {"DAILY": "day", "WEEKLY": "week", "MONTHLY": "month", "YEARLY": "year"}.get(freq)
    if unit is None:
        return f"at RRULE {text!r}"
    every = f"every {unit}" if interval == 1 else f"every {interval} {unit}s"
    days = [_RRULE_DAYS[d] for d in parts.get("BYDAY", "").split(",") if d in _RRULE_DAYS]
    on = f" on {_days(days)}" if days else ""
    if parts.get("BYMONTHDAY", "").isdigit():
        on += f" on day {int(parts['BYMONTHDAY'])}"
    return f"{every}{on}{at}"


def _days(days: list[int]) -> str:
    names = [_WEEKDAYS[d] for d in sorted(set(days))]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
