"""When a plan's restore points are due for a scheduled verify, and of which kind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.records.plans import VerifyPolicy
from services.records.restore_points import RestorePoint
from services.scheduler.verifies import due_fraction

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _rp(completed_days_ago: float, *, verified_days_ago: float | None = None,
        full_days_ago: float | None = None) -> RestorePoint:
    done = NOW - timedelta(days=completed_days_ago)
    return RestorePoint(
        created_at=done, completed_at=done,
        verified_at=None if verified_days_ago is None else NOW - timedelta(days=verified_days_ago),
        verified_full_at=None if full_days_ago is None else NOW - timedelta(days=full_days_ago))


def test_default_policy_samples_weekly_and_reads_everything_monthly() -> None:
    policy = VerifyPolicy()
    assert due_fraction(policy, _rp(1), NOW) == (False, None)
    assert due_fraction(policy, _rp(8), NOW) == (True, 0.05)
    assert due_fraction(policy, _rp(20, verified_days_ago=2), NOW) == (False, None)
    assert due_fraction(policy, _rp(31, verified_days_ago=2), NOW) == (True, None)
    assert due_fraction(policy, _rp(60, verified_days_ago=3, full_days_ago=10), NOW) == \
        (False, None)
    assert due_fraction(policy, _rp(60, verified_days_ago=8, full_days_ago=10), NOW) == \
        (True, 0.05)


def test_either_kind_can_be_turned_off() -> None:
    only_full = VerifyPolicy(sampled_every_days=None)
    assert due_fraction(only_full, _rp(10), NOW) == (False, None)
    assert due_fraction(only_full, _rp(40), NOW) == (True, None)
    never = VerifyPolicy(sampled_every_days=None, full_every_days=None)
    assert due_fraction(never, _rp(400), NOW) == (False, None)
