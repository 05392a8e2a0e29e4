"""Five-field cron expressions (minute hour day-of-month month day-of-week), parsed into sets
and enumerated day by day on the local wall clock.

Semantics are Vixie cron's: lists, ranges, steps, `*`, month and weekday names, 0 and 7 both
Sunday; when both day-of-month and day-of-week are restricted, a day matching either one
fires (cron's own rule, surprising but expected by everyone who writes cron lines)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from services.errors import InvalidSchedule

_MONTHS = {name: i for i, name in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}
_WEEKDAYS = {name: i for i, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _WEEKDAYS),
)
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
           "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
           "@hourly": "0 * * * *"}


@dataclass(frozen=True)
class CronSpec:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 = Sunday ... 6 = Saturday (7 is folded into 0)."""
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        cron_weekday = (day.weekday() + 1) % 7
        in_days = day.day in self.days
        in_weekdays = cron_weekday in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays

    def times_from(self, start: datetime) -> Iterator[datetime]:
        """Naive wall-clock times matching the expression, at or after `start` (naive),
        in order. Gives up after 5 years without a match (e.g. `0 0 30 2 *`)."""
        day = start.date()
        for _ in range(366 * 5):
            if self.day_matches(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        moment = datetime.combine(day, time(hour, minute))
                        if moment >= start:
                            yield moment
            day += timedelta(days=1)


def parse(expression: str) -> CronSpec:
    text = _MACROS.get(expression.strip().lower(), expression).strip()
    parts = text.split()
    if len(parts) != 5:
        raise InvalidSchedule(
            f"cron expression {expression!r} has {len(parts)} fields; it needs 5: "
            "minute hour day-of-month month day-of-week (e.g. '0 2 * * *' for 02:00 daily)")
    sets = [_parse_field(part, *field) for part, field in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])
    spec = CronSpec(tuple(sorted(sets[0])), tuple(sorted(sets[1])), frozenset(sets[2]),
                    frozenset(sets[3]), weekdays, parts[2] != "*", parts[4] != "*")
    if not any(spec.day_matches(date(2024, 1, 1) + timedelta(days=i)) for i in range(366 * 4)):
        raise InvalidSchedule(f"cron expression {expression!r} never fires (no such date)")
    return spec


def _parse_field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        values |= _parse_item(item, name, low, high, names)
    return values


def _parse_item(item: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    where = f"cron {name} field {item!r}"
    body, _, step_text = item.partition("/")
    step = 1
    if step_text:
        if not _is_number(step_text) or int(step_text) == 0:
            raise InvalidSchedule(f"{where}: the step after '/' must be a positive number")
        step = int(step_text)
    if body == "*":
        first, last = low, high
    elif "-" in body:
        a, _, b = body.partition("-")
        first, last = _value(a, where, low, high, names), _value(b, where, low, high, names)
        if first > last:
            raise InvalidSchedule(f"{where}: range goes backwards ({first} > {last})")
    else:
        first = _value(body, where, low, high, names)
        last = high if step_text else first
    return set(range(first, last + 1, step))


def _value(text: str, where: str, low: int, high: int, names: dict[str, int]) -> int:
    lowered = text.lower()
    if lowered in names:
        return names[lowered]
    if not _is_number(text):
        hint = f" or a name ({', '.join(names)})" if names else ""
        raise InvalidSchedule(f"{where}: {text!r} is not a number{hint}")
    value = int(text)
    if not low <= value <= high:
        raise InvalidSchedule(f"{where}: {value} is outside {low}-{high}")
    return value


def _is_number(text: str) -> bool:
    """ASCII digits only: str.isdigit() also accepts '²' and other digits int() refuses, and
    an unbounded run of digits would cost int() seconds."""
    return text.isascii() and text.isdigit() and len(text) <= 4
