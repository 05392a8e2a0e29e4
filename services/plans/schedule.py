"""When a plan runs: its rules (cron or RFC 5545 RRULE, each in an IANA timezone and with a
kind) turned into slots in UTC, and its backup window.

Rules are evaluated on the local wall clock and each wall-clock time fires once:
- a time that does not exist (spring forward: 02:30 in Europe/Berlin on the last Sunday of
  March) fires at the same distance past the gap's start, i.e. 03:30 local, which is the
  instant the clock would have shown 02:30 without the change;
- a time that exists twice (fall back) fires at its first occurrence only.
So a daily 02:30 rule runs exactly once on both transition days. Two rules hitting the same
instant make one slot; when their kinds differ, full wins."""

from __future__ import annotations

import heapq
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from itertools import pairwise
from types import FrameType
from typing import Any
from zoneinfo import ZoneInfo

from dateutil.rrule import DAILY, HOURLY, WEEKLY, rrule, rrulestr

from services.clock import zone as zone  # noqa: PLC0414 (re-exported for the plans' code)
from services.errors import InvalidSchedule
from services.plans import cron
from services.status import RestorePointKind

_DST_SLACK = timedelta(hours=3)
"""More than any UTC offset ever jumps at once: a wall-clock time later than another never
lands this much earlier in UTC, which lets the merge emit slots in order."""


HORIZON = timedelta(days=366 * 5)
"""How far ahead a rule is ever evaluated. A rule with no slot in it is refused, and no
evaluation walks further: dateutil walks a rule that never fires to the year 9999 (6 s of
CPU for `FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=31`)."""

MAX_INTERVAL = 1000
STEP_BUDGET = 150_000
"""Lines of dateutil's rule walk one evaluation may run: about 5 000 periods, 40 ms (a rule
that matches once in five years takes 60 000).
dateutil checks UNTIL only against occurrences it found, so a rule that stops matching
(`FREQ=HOURLY;INTERVAL=2;BYDAY=MO;BYMONTH=2;BYMONTHDAY=30` and its kin) walks on without
bound; nothing but counting its steps stops it."""
_SAMPLE = 500
"""Slots looked at when checking a rule's spacing."""
_PERIODS = {HOURLY: timedelta(hours=1), DAILY: timedelta(days=1), WEEKLY: timedelta(weeks=1)}


def to_utc(wall: datetime, tz: ZoneInfo) -> datetime:
    """A naive local wall-clock time as a UTC instant (fold=0: the first occurrence of an
    ambiguous time; a nonexistent time is read with the offset before the gap)."""
    return wall.replace(tzinfo=tz, fold=0).astimezone(UTC)


def local_wall(at: datetime, tz: ZoneInfo) -> datetime:
    return at.astimezone(tz).replace(tzinfo=None)


@dataclass(frozen=True)
class Rule:
    kind: RestorePointKind
    tz: ZoneInfo
    cron: cron.CronSpec | None = None
    rrule: rrule | None = None

    def wall_times(self, start: datetime) -> Iterator[datetime]:
        if self.cron is not None:
            return self.cron.times_from(start)
        assert self.rrule is not None
        return iter(_bounded(self.rrule, start).xafter(start, inc=True))

    def instants(self, after: datetime) -> Iterator[datetime]:
        """UTC instants of this rule strictly after `after`, ascending, without repeats."""
        pending: list[datetime] = []
        last: datetime | None = None
        for wall in self.wall_times(local_wall(after, self.tz) - _DST_SLACK):
            at = to_utc(wall, self.tz)
            heapq.heappush(pending, at)
            # Later wall times land at least this late, so everything before is final.
            horizon = at - _DST_SLACK
            while pending and pending[0] < horizon:
                at = heapq.heappop(pending)
                if at > after and at != last:
                    last = at
                    yield at
        while pending:
            at = heapq.heappop(pending)
            if at > after and at != last:
                last = at
                yield at


def _bounded(rule: rrule, start: datetime) -> rrule:
    """`rule` for walking from `start`: it ends a HORIZON after `start`, and its DTSTART
    moves forward by whole periods (INTERVAL kept in phase) when it lies far back, so a plan
    saved years ago costs what a new one does: dateutil walks every period from DTSTART.
    HOURLY, DAILY and WEEKLY move safely (the hour, minute and weekday dateutil takes from
    DTSTART stay the same); MONTHLY and YEARLY cost at most 12 steps a year anyway."""
    dtstart: datetime = getattr(rule, "_dtstart")  # noqa: B009 (dateutil keeps no public view)
    until: datetime | None = getattr(rule, "_until")  # noqa: B009
    period = _PERIODS.get(getattr(rule, "_freq"))  # noqa: B009
    moved = dtstart
    if period is not None:
        step = period * getattr(rule, "_interval")  # noqa: B009
        skip = (start - dtstart) // step - 1
        if skip > 0:
            moved = dtstart + step * skip
    limit = start + HORIZON
    if moved == dtstart and until is not None and until <= limit:
        return rule
    return rule.replace(dtstart=moved, until=limit if until is None else min(until, limit))


def _until(rule: Rule) -> datetime | None:
    return getattr(rule.rrule, "_until", None)


def check_rules(rules: Sequence[Rule], now: datetime, min_interval: timedelta) -> None:
    """Refuse, in milliseconds, rules the scheduler could not keep: a rule whose UNTIL has
    passed, rules with no slot within HORIZON, slots closer than `min_interval`."""
    for i, rule in enumerate(rules):
        until = _until(rule)
        if until is not None and until <= local_wall(now, rule.tz):
            raise InvalidSchedule(f"rule {i}: its UNTIL ({until.isoformat()}) has passed, so "
                                  "it would never run; remove UNTIL or move it later",
                                  field=f"rules.{i}.rrule")
    found = slots(rules, now, until=now + HORIZON, count=_SAMPLE)
    if not found:
        raise InvalidSchedule(f"the rules have no slot in the next {HORIZON.days // 366} "
                              "years, so the plan would never run", field="rules")
    for first, second in pairwise(found):
        if second.at - first.at < min_interval:
            raise InvalidSchedule(
                f"the rules make slots only {_minutes(second.at - first.at)} apart "
                f"({first.at.isoformat()} and {second.at.isoformat()}); a plan runs at most "
                f"every {_minutes(min_interval)}", field="rules",
                min_interval_minutes=min_interval.total_seconds() / 60)


def _minutes(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def compile_rule(kind: RestorePointKind, timezone: str, *, cron_text: str | None = None,
                 rrule_text: str | None = None, start: datetime | None = None,
                 field: str = "rules") -> Rule:
    tz = zone(timezone, field=f"{field}.timezone")
    if (cron_text is None) == (rrule_text is None):
        raise InvalidSchedule("a schedule rule has either `cron` or `rrule`, not both or neither",
                              field=field)
    if cron_text is not None:
        return Rule(kind, tz, cron=cron.parse(cron_text))
    assert rrule_text is not None
    return Rule(kind, tz, rrule=_parse_rrule(rrule_text, start))


def _parse_rrule(text: str, start: datetime | None) -> rrule:
    body = text.strip()
    if body.upper().startswith("RRULE:"):
        body = body[6:]
    if "DTSTART" in body.upper() or "\n" in body:
        raise InvalidSchedule(f"RRULE {text!r}: give only the rule line; the start goes in the "
                              "rule's `start` field and the zone in `timezone`")
    if "FREQ=" not in body.upper():
        raise InvalidSchedule(f"RRULE {text!r} has no frequency: add FREQ=DAILY, FREQ=WEEKLY, "
                              "FREQ=MONTHLY or FREQ=YEARLY (e.g. 'FREQ=DAILY;BYHOUR=2;BYMINUTE=0')")
    interval = re.search(r"(?:^|;)\s*INTERVAL\s*=\s*([^;]*)", body, re.IGNORECASE)
    if interval is not None and not (interval.group(1).strip().isascii()
                                     and interval.group(1).strip().isdigit()
                                     and 1 <= int(interval.group(1)) <= MAX_INTERVAL):
        raise InvalidSchedule(f"RRULE {text!r}: INTERVAL must be a whole number from 1 to "
                              f"{MAX_INTERVAL}")
    if re.search(r"(?:^|;)\s*COUNT\s*=", body, re.IGNORECASE):
        raise InvalidSchedule(f"RRULE {text!r}: COUNT is not supported; end a rule with UNTIL "
                              "(or pause the plan)")
    dtstart = (start or datetime(2026, 1, 1)).replace(second=0, microsecond=0, tzinfo=None)
    try:
        parsed = rrulestr(body, dtstart=dtstart, ignoretz=True)
    except (ValueError, TypeError, OverflowError, IndexError, KeyError) as exc:
        raise InvalidSchedule(f"RRULE {text!r} is not valid RFC 5545: {exc}") from None
    if not isinstance(parsed, rrule):
        raise InvalidSchedule(f"RRULE {text!r}: give one rule, not a set")
    upper = body.upper()
    if "FREQ=SECONDLY" in upper or "FREQ=MINUTELY" in upper:
        raise InvalidSchedule(f"RRULE {text!r}: a backup plan runs at most hourly; use "
                              "FREQ=HOURLY or slower")
    if "BYSECOND" in upper:
        raise InvalidSchedule(f"RRULE {text!r}: BYSECOND is not supported; slots are whole "
                              "minutes")
    return parsed


@dataclass(frozen=True)
class Slot:
    at: datetime
    """UTC."""
    kind: RestorePointKind


class TooCostly(InvalidSchedule):
    code = "schedule_too_costly"


_WALK = rrule._iter.__code__  # type: ignore[attr-defined]


@contextmanager
def _step_budget(steps: int) -> Iterator[None]:
    """Run the block with dateutil's rule walk limited to `steps` lines: over it, the walk
    raises TooCostly. Tracing is per thread, and only the walk's own frames are counted."""
    taken = 0

    def count(frame: FrameType, event: str, _arg: Any) -> Any:
        nonlocal taken
        if event == "line":
            taken += 1
            if taken > steps:
                raise TooCostly("the rules take too long to evaluate: they match too rarely "
                                "(no slot for decades); simplify them or use a cron line")
        return count

    def watch(frame: FrameType, _event: str, _arg: Any) -> Any:
        return count if frame.f_code is _WALK else None

    previous = sys.gettrace()
    sys.settrace(watch)
    try:
        yield
    finally:
        sys.settrace(previous)


def slots(rules: Sequence[Rule], after: datetime, *, until: datetime | None = None,
          count: int | None = None) -> list[Slot]:
    """Slots of all rules strictly after `after` (and at or before `until`), ascending, at
    most `count`; rules hitting the same instant merge, full winning. Raises TooCostly when
    an RRULE walks more than STEP_BUDGET steps."""
    if until is None and count is None:
        raise ValueError("slots() needs `until` or `count`")
    if any(rule.rrule is not None for rule in rules):
        with _step_budget(STEP_BUDGET):
            return _slots(rules, after, until, count)
    return _slots(rules, after, until, count)


def _slots(rules: Sequence[Rule], after: datetime, until: datetime | None,
           count: int | None) -> list[Slot]:
    out: list[Slot] = []
    # At one instant "full" sorts before "incremental", so the first slot kept is full.
    merged = heapq.merge(*(_tagged(rule, after) for rule in rules))
    for at, kind in merged:
        if until is not None and at > until:
            break
        if out and out[-1].at == at:
            continue
        if count is not None and len(out) >= count:
            break
        out.append(Slot(at, kind))
    return out


def _tagged(rule: Rule, after: datetime) -> Iterator[tuple[datetime, RestorePointKind]]:
    for at in rule.instants(after):
        yield at, rule.kind


@dataclass(frozen=True)
class Window:
    """A daily backup window on the local wall clock, e.g. 22:00-06:00 (crossing midnight)."""

    start: time
    end: time
    tz: ZoneInfo

    def contains(self, at: datetime) -> bool:
        now = at.astimezone(self.tz).time()
        if self.start < self.end:
            return self.start <= now < self.end
        return now >= self.start or now < self.end

    def next_open(self, at: datetime) -> datetime:
        """The first instant at or after `at` inside the window (UTC)."""
        if self.contains(at):
            return at
        wall = local_wall(at, self.tz)
        opening = wall.replace(hour=self.start.hour, minute=self.start.minute, second=0,
                               microsecond=0)
        if opening <= wall:
            opening += timedelta(days=1)
        return to_utc(opening, self.tz)


def parse_clock(text: str, field: str) -> time:
    try:
        hour_text, minute_text = text.split(":")
        value = time(int(hour_text), int(minute_text))
    except ValueError:
        raise InvalidSchedule(f"{field} {text!r} is not a time of day: use HH:MM, e.g. '22:00'",
                              field=field) from None
    return value
