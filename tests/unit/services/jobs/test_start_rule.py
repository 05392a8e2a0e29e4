"""The start rule as the scheduler's admission and the worker's claim both apply it: a job
starts when it is due, inside its plan's backup window (read on the plan's own wall clock,
across midnight) if it is a scheduled job that never started, and holds its slots; else it
is told what it waits for and until when."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from services.jobs.start_rule import StartFacts, Wait, WaitReason, must_wait
from services.limits.leases import Scope
from services.plans.schedule import Window, zone

# A Friday in November: Berlin is UTC+1, New York UTC-5.
SLOT = datetime(2026, 11, 20, 21, 0, tzinfo=UTC)
NIGHT_IN_BERLIN = Window(time(22, 0), time(6, 0), zone("Europe/Berlin"))
FULL = Scope("cairn:slots:target:ceph-b", 4, "target 'ceph-b'")


def _scheduled(*, not_before: datetime | None = SLOT, attempt: int = 0) -> StartFacts:
    return StartFacts(not_before=not_before, plan_id="plan", slot_at=SLOT, attempt=attempt)


def test_a_job_starts_at_its_not_before_and_not_earlier() -> None:
    job = _scheduled()
    assert must_wait(job, None, SLOT - timedelta(seconds=1)) == Wait(WaitReason.NOT_DUE, SLOT)
    assert must_wait(job, None, SLOT) is None
    assert must_wait(StartFacts(not_before=None, plan_id=None, slot_at=None, attempt=0),
                     None, SLOT) is None


@pytest.mark.parametrize(("now", "berlin"), [
    (datetime(2026, 11, 20, 21, 0, tzinfo=UTC), "22:00, the opening"),
    (datetime(2026, 11, 20, 23, 30, tzinfo=UTC), "00:30, past midnight"),
    (datetime(2026, 11, 21, 4, 59, tzinfo=UTC), "05:59, the last minute"),
])
def test_inside_a_window_that_crosses_midnight_a_job_starts(now: datetime, berlin: str) -> None:
    assert must_wait(_scheduled(), NIGHT_IN_BERLIN, now) is None, berlin


@pytest.mark.parametrize(("now", "opens"), [
    # 06:00 Berlin: the end is not inside; the window opens again that evening.
    (datetime(2026, 11, 21, 5, 0, tzinfo=UTC), datetime(2026, 11, 21, 21, 0, tzinfo=UTC)),
    # 13:00 Berlin: later the same day.
    (datetime(2026, 11, 21, 12, 0, tzinfo=UTC), datetime(2026, 11, 21, 21, 0, tzinfo=UTC)),
])
def test_outside_its_window_a_due_job_waits_for_the_next_opening(now: datetime,
                                                                  opens: datetime) -> None:
    assert must_wait(_scheduled(), NIGHT_IN_BERLIN, now) == Wait(WaitReason.OUTSIDE_WINDOW,
                                                                 opens)


def test_the_window_is_read_on_the_plans_own_clock() -> None:
    """01:00-05:00 is 06:00-10:00 UTC in New York in November: 07:00 UTC is inside there,
    and outside the same hours in UTC, whose window opens at 01:00 UTC the next day."""
    now = datetime(2026, 11, 21, 7, 0, tzinfo=UTC)
    new_york = Window(time(1, 0), time(5, 0), zone("America/New_York"))
    assert must_wait(_scheduled(), new_york, now) is None
    utc = Window(time(1, 0), time(5, 0), zone("UTC"))
    assert must_wait(_scheduled(), utc, now) == Wait(
        WaitReason.OUTSIDE_WINDOW, datetime(2026, 11, 22, 1, 0, tzinfo=UTC))


def test_only_a_scheduled_job_that_never_started_keeps_to_the_window() -> None:
    outside = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    on_demand = StartFacts(not_before=None, plan_id=None, slot_at=None, attempt=0)
    run_now = StartFacts(not_before=None, plan_id="plan", slot_at=None, attempt=0)
    # A job that started runs to its end: its retry after a crash too.
    retry = _scheduled(attempt=1)
    for job in (on_demand, run_now, retry):
        assert must_wait(job, NIGHT_IN_BERLIN, outside) is None, job


def test_not_due_is_met_before_the_window() -> None:
    later = datetime(2026, 11, 21, 21, 0, tzinfo=UTC)
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    assert must_wait(_scheduled(not_before=later), NIGHT_IN_BERLIN, now) == Wait(
        WaitReason.NOT_DUE, later)


def test_a_job_whose_slot_is_taken_waits_for_one_keeping_its_not_before() -> None:
    now = SLOT + timedelta(minutes=5)
    assert must_wait(_scheduled(), NIGHT_IN_BERLIN, now, full=FULL) == Wait(
        WaitReason.NO_SLOT, SLOT, FULL)
    assert must_wait(_scheduled(), NIGHT_IN_BERLIN, now, full=None) is None


def test_outside_its_window_a_job_waits_for_the_window_whatever_its_slots_say() -> None:
    """So a caller that asks Redis only for jobs the window lets start loses nothing."""
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    wait = must_wait(_scheduled(), NIGHT_IN_BERLIN, now, full=FULL)
    assert wait is not None
    assert wait.reason == WaitReason.OUTSIDE_WINDOW
