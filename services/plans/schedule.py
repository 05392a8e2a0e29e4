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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrule, rrulestr

from services.errors import InvalidSchedule
from services.plans import cron
from services.status import RestorePointKind

_DST_SLACK = timedelta(hours=3)
"""More than any UTC offset ever jumps at once: a wall-clock time later than another never
lands this much earlier in UTC, which lets the merge emit slots in order."""


def zone(name: str, *, field: str = "timezone") -> ZoneInfo:
    try:
        if not name or name != name.strip():
            raise ZoneInfoNotFoundError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"unknown timezone {name!r}: use an IANA name such as "
                              "'Europe/Berlin', 'America/New_York' or 'UTC'",
                              field=field) from None


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
        return iter(self.rrule.xafter(start, inc=True))

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
    dtstart = (start or datetime(2026, 1, 1)).replace(second=0, microsecond=0, tzinfo=None)
    try:
        parsed = rrulestr(body, dtstart=dtstart, ignoretz=True)
    except (ValueError, TypeError) as exc:
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


def slots(rules: Sequence[Rule], after: datetime, *, until: datetime | None = None,
          count: int | None = None) -> list[Slot]:
    """Slots of all rules strictly after `after` (and at or before `until`), ascending, at
    most `count`; rules hitting the same instant merge, full winning."""
    if until is None and count is None:
        raise ValueError("slots() needs `until` or `count`")
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
