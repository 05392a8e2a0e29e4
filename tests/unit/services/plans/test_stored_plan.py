"""A plan's rules, retention and verify policy are typed values in code and plain JSON in
the database: rows written before they were typed read back the same, and a value the
models refuse never reaches a row (on a real SQLite)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from sqlalchemy import text

from services.db import Database
from services.records.plans import Plan, Retention, StoredRule, VerifyPolicy
from services.status import PlanStatus, RestorePointKind

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _plan(**fields: object) -> Plan:
    values: dict[str, object] = {
        "id": "p1", "project_id": "proj", "name": "nightly", "target": "local",
        "timezone": "Europe/Berlin", "status": PlanStatus.ENABLED, "created_at": NOW,
        "updated_at": NOW, "rules": [], "retention": {}}
    values.update(fields)
    return Plan(**values)


def test_rows_written_as_plain_json_read_back_typed(db: Database) -> None:
    with db.session() as session:
        session.add(_plan())
        session.flush()
        # What 0003..0007 wrote: dicts, an RRULE's start as an ISO string, no verify policy.
        session.execute(text("UPDATE plans SET rules = :rules, retention = :retention, "
                             "verify_policy = NULL"), {
            "rules": json.dumps([{"kind": "full", "rrule": "FREQ=WEEKLY;BYDAY=SU",
                                  "start": "2026-11-22T00:00:00"},
                                 {"kind": "incremental", "cron": "0 2 * * *"}]),
            "retention": json.dumps({"daily": 7, "weekly": 4})})
    with db.session() as session:
        plan = session.get(Plan, "p1")
        assert plan is not None
        assert plan.rules == [
            StoredRule(kind=RestorePointKind.FULL, rrule="FREQ=WEEKLY;BYDAY=SU",
                       start=datetime(2026, 11, 22)),
            StoredRule(kind=RestorePointKind.INCREMENTAL, cron="0 2 * * *")]
        assert plan.retention == Retention(daily=7, weekly=4)
        assert plan.verify_policy is None


def test_typed_values_are_stored_as_the_same_json(db: Database) -> None:
    off = VerifyPolicy(sampled_every_days=None, full_every_days=90)
    with db.session() as session:
        session.add(_plan(rules=[StoredRule(cron="30 1 * * *", timezone="UTC")],
                          retention=Retention(keep_last=3), verify_policy=off))
    with db.session() as session:
        row = session.execute(text("SELECT rules, retention, verify_policy FROM plans")).one()
        plan = session.get(Plan, "p1")
    assert json.loads(row.rules) == [{"kind": "incremental", "cron": "30 1 * * *",
                                      "timezone": "UTC"}]
    assert json.loads(row.retention)["keep_last"] == 3
    # None turns the sampled verify off: it is kept, not dropped for the default.
    assert json.loads(row.verify_policy)["sampled_every_days"] is None
    assert plan is not None
    assert plan.verify_policy == off


def test_a_value_the_models_refuse_never_reaches_a_row() -> None:
    with pytest.raises(ValidationError, match="keep_last"):
        _plan(retention={"keep_last": -1})
    with pytest.raises(ValidationError, match="colour"):
        _plan(rules=[{"cron": "0 2 * * *", "colour": "red"}])
