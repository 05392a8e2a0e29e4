"""Which restore points a plan keeps.

The rule, per (volume, target), over the plan's `available` restore points, newest first:

- `keep_last` N: the N newest are kept.
- `daily` D: the calendar days (in the plan's timezone) that have restore points are taken
  newest first; for each of the D newest such days the newest restore point of that day is
  kept. Days without a backup are not counted, so a paused week does not eat the budget.
- `weekly` W: the same with ISO weeks (Monday to Sunday): the newest restore point of each of
  the W newest weeks that have one.
- `monthly` M: the same with calendar months: the monthly is the last backup of its month.
- `yearly` Y: the same with calendar years: the last backup of the year.

A restore point may be kept by several rules; the preview names all of them. Everything not
kept is pruned, except that a prune never deletes a locked restore point (locked_until in the
future), the newest available restore point of the volume on the target (the base of the
next incremental), or one that a queued or running restore or verify reads. Fulls and
incrementals are treated alike: every restore point is a complete snapshot of its own, so
deleting any of them never breaks another."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Policy:
    keep_last: int = 0
    daily: int = 0
    weekly: int = 0
    monthly: int = 0
    yearly: int = 0

    @property
    def keeps_everything(self) -> bool:
        return not any((self.keep_last, self.daily, self.weekly, self.monthly, self.yearly))


@dataclass(frozen=True)
class Point:
    id: str
    created_at: datetime
    """UTC; the moment the source snapshot was taken."""
    locked_until: datetime | None = None
    in_use: bool = False
    """A queued or running restore or verify reads it."""


@dataclass
class Verdict:
    point: Point
    kept_by: list[str] = field(default_factory=list)

    @property
    def keep(self) -> bool:
        return bool(self.kept_by)


_PERIODS: list[tuple[str, Callable[[datetime], Hashable]]] = [
    ("daily", lambda d: d.date()),
    ("weekly", lambda d: d.isocalendar()[:2]),
    ("monthly", lambda d: (d.year, d.month)),
    ("yearly", lambda d: d.year),
]


def evaluate(points: Sequence[Point], policy: Policy, tz: ZoneInfo,
             now: datetime) -> list[Verdict]:
    """A verdict for each restore point of one (volume, target), newest first. A policy
    that keeps nothing (all counts 0) keeps everything: retention is then off."""
    ordered = sorted(points, key=lambda p: (p.created_at, p.id), reverse=True)
    verdicts = [Verdict(p) for p in ordered]
    if policy.keeps_everything:
        for v in verdicts:
            v.kept_by.append("no retention rule")
        return verdicts
    for v in verdicts[:policy.keep_last]:
        v.kept_by.append("last")
    for name, period in _PERIODS:
        budget = getattr(policy, name)
        seen: set[Hashable] = set()
        for v in verdicts:
            if len(seen) >= budget:
                break
            key = period(v.point.created_at.astimezone(tz))
            if key not in seen:
                seen.add(key)
                v.kept_by.append(name)
    for i, v in enumerate(verdicts):
        if i == 0:
            v.kept_by.append("newest")
        if v.point.locked_until is not None and v.point.locked_until > now:
            v.kept_by.append("locked")
        if v.point.in_use:
            v.kept_by.append("in use")
    return verdicts
