"""May this queued job start now: the one rule. Admission applies it before it sends a job
(`services/scheduler/admission.py`); the worker's claim asserts it again when the job
arrives (`worker/managers/claim.py`), because time passes between the two: a window may
close, a Redis restart may drop the slots a sent job held.

A job starts when it is

1. due: not before its `not_before` (its slot, the opening of its plan's window, or the
   time it was last told to wait for);
2. inside its plan's backup window, if it is a scheduled job that never started: on-demand
   and run-now jobs have no window, and a job that started runs to its end, its retry
   after a crash included;
3. holding a slot in each of its scopes (`services/limits/leases.py`).

The first two are facts of the job, its plan's window and the clock. The third is a count
every process shares, which only Redis can take atomically (`Leases.acquire`, all scopes
or none): a caller takes the slots only of a job the first two let start, then gives the
answer back here (`full`), so what each wait means, and what the job is told to wait for,
is written once. Condition 1 also has a SQL form (`due`), for the queries that look for
candidates."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import ColumnElement, or_

from services.limits.leases import Scope
from services.records.jobs import Job


class Window(Protocol):
    """A plan's daily backup window in its own timezone (`services/plans/schedule.Window`)."""

    def contains(self, at: datetime) -> bool: ...

    def next_open(self, at: datetime) -> datetime: ...


@dataclass(frozen=True, kw_only=True)
class StartFacts:
    """What the rule reads of a job."""

    not_before: datetime | None
    plan_id: str | None
    slot_at: datetime | None
    attempt: int

    @classmethod
    def of(cls, job: Job) -> StartFacts:
        return cls(not_before=job.not_before, plan_id=job.plan_id, slot_at=job.slot_at,
                   attempt=job.attempt)

    @property
    def keeps_to_window(self) -> bool:
        """A plan's scheduled job that never started; only its plan's window is asked."""
        return self.plan_id is not None and self.slot_at is not None and self.attempt == 0


def due(now: datetime) -> ColumnElement[bool]:
    """Condition 1 as SQL, for the queries that look for candidates: a job not due is not
    one, and must not take the place of one that is in a batch of the first N."""
    return or_(Job.not_before.is_(None), Job.not_before <= now)


class WaitReason(enum.StrEnum):
    NOT_DUE = "not_due"
    OUTSIDE_WINDOW = "outside_window"
    NO_SLOT = "no_slot"


@dataclass(frozen=True)
class Wait:
    """Why a job may not start now, and the `not_before` it keeps while it waits."""

    reason: WaitReason
    until: datetime | None
    """When to ask again (the job's `not_before`); for a slot, the job's own, unchanged:
    a slot frees when another job ends, at no time anyone can name."""
    full: Scope | None = None
    """The scope with no free slot (NO_SLOT)."""


def must_wait(job: StartFacts, window: Window | None, now: datetime, *,
              full: Scope | None = None) -> Wait | None:
    """None when `job` may start at `now`; else why not, in the order a job meets the
    conditions. `window` is its plan's (None: none, or no plan); `full` is what taking its
    slots answered (None: they are free, or not asked yet)."""
    if job.not_before is not None and job.not_before > now:
        return Wait(WaitReason.NOT_DUE, job.not_before)
    if job.keeps_to_window and window is not None and not window.contains(now):
        return Wait(WaitReason.OUTSIDE_WINDOW, window.next_open(now))
    if full is not None:
        return Wait(WaitReason.NO_SLOT, job.not_before, full)
    return None
