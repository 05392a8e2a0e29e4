"""Slots of cron and RRULE rules in several timezones, across both DST transitions: each
case lists exactly the slots a user expects (pure logic, no clock but the one given)."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from services.errors import InvalidSchedule
from services.plans.schedule import Window, compile_rule, slots, zone
from services.status import RestorePointKind

INC, FULL = RestorePointKind.INCREMENTAL, RestorePointKind.FULL


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def run(rules: list[tuple[RestorePointKind, str, str]], after: datetime,
        count: int) -> list[tuple[str, str]]:
    compiled = []
    for kind, tz, text in rules:
        if text.startswith("FREQ="):
            compiled.append(compile_rule(kind, tz, rrule_text=text, start=datetime(2026, 1, 1)))
        else:
            compiled.append(compile_rule(kind, tz, cron_text=text))
    return [(s.at.strftime("%Y-%m-%dT%H:%MZ"), s.kind.value)
            for s in slots(compiled, after, count=count)]


BERLIN_DAILY_AND_SUNDAY_FULL = [(INC, "Europe/Berlin", "30 2 * * *"),
                                (FULL, "Europe/Berlin", "30 2 * * sun")]


def test_berlin_spring_forward_runs_the_missing_0230_once_at_0330_and_full_wins() -> None:
    # 2026-03-29 (a Sunday): clocks jump 02:00 -> 03:00; 02:30 does not exist.
    assert run(BERLIN_DAILY_AND_SUNDAY_FULL, utc(2026, 3, 27), 4) == [
        ("2026-03-27T01:30Z", "incremental"),   # 02:30 CET
        ("2026-03-28T01:30Z", "incremental"),
        ("2026-03-29T01:30Z", "full"),          # 03:30 CEST, once, and the Sunday full wins
        ("2026-03-30T00:30Z", "incremental"),   # 02:30 CEST
    ]


def test_berlin_fall_back_runs_the_doubled_0230_once_at_its_first_occurrence() -> None:
    # 2026-10-25 (a Sunday): 03:00 CEST -> 02:00 CET; 02:30 happens twice.
    assert run(BERLIN_DAILY_AND_SUNDAY_FULL, utc(2026, 10, 23), 4) == [
        ("2026-10-23T00:30Z", "incremental"),
        ("2026-10-24T00:30Z", "incremental"),
        ("2026-10-25T00:30Z", "full"),          # 02:30 CEST only, not again at 02:30 CET
        ("2026-10-26T01:30Z", "incremental"),   # 02:30 CET
    ]


def test_new_york_rrule_across_both_transitions() -> None:
    rule = [(INC, "America/New_York", "FREQ=DAILY;BYHOUR=2;BYMINUTE=30")]
    assert run(rule, utc(2026, 3, 7), 3) == [
        ("2026-03-07T07:30Z", "incremental"),   # 02:30 EST
        ("2026-03-08T07:30Z", "incremental"),   # 02:30 does not exist: 03:30 EDT
        ("2026-03-09T06:30Z", "incremental"),   # 02:30 EDT
    ]
    assert run(rule, utc(2026, 10, 31), 3) == [
        ("2026-10-31T06:30Z", "incremental"),   # 02:30 EDT
        ("2026-11-01T07:30Z", "incremental"),   # after the 02:00 -> 01:00 fall back: EST
        ("2026-11-02T07:30Z", "incremental"),
    ]


def test_sydney_southern_hemisphere_transitions() -> None:
    rule = [(INC, "Australia/Sydney", "30 2 * * *")]
    assert run(rule, utc(2026, 4, 3), 3) == [
        ("2026-04-03T15:30Z", "incremental"),   # 02:30 AEDT
        ("2026-04-04T15:30Z", "incremental"),   # 5 April, doubled 02:30: the first (AEDT)
        ("2026-04-05T16:30Z", "incremental"),   # 02:30 AEST
    ]
    assert run(rule, utc(2026, 10, 2), 3) == [
        ("2026-10-02T16:30Z", "incremental"),   # 02:30 AEST
        ("2026-10-03T16:30Z", "incremental"),   # 4 October, 02:30 missing: 03:30 AEDT
        ("2026-10-04T15:30Z", "incremental"),   # 02:30 AEDT
    ]


def test_hourly_rule_fires_each_wall_clock_hour_once_on_fall_back() -> None:
    rule = [(INC, "Europe/Berlin", "0 * * * *")]
    assert run(rule, utc(2026, 10, 24, 23, 0), 4) == [
        ("2026-10-25T00:00Z", "incremental"),   # 02:00 CEST
        ("2026-10-25T02:00Z", "incremental"),   # 03:00 CET (02:00 CET is 02:00 again)
        ("2026-10-25T03:00Z", "incremental"),
        ("2026-10-25T04:00Z", "incremental"),
    ]


def test_biweekly_rrule_counts_from_its_start_and_monthly_cron_in_sao_paulo() -> None:
    assert run([(FULL, "Asia/Tokyo", "FREQ=WEEKLY;INTERVAL=2;BYDAY=SA;BYHOUR=23;BYMINUTE=15")],
               utc(2026, 11, 1), 3) == [
        ("2026-11-07T14:15Z", "full"), ("2026-11-21T14:15Z", "full"),
        ("2026-12-05T14:15Z", "full")]
    assert run([(FULL, "America/Sao_Paulo", "0 3 1 * *")], utc(2026, 11, 1), 3) == [
        ("2026-11-01T06:00Z", "full"), ("2026-12-01T06:00Z", "full"),
        ("2027-01-01T06:00Z", "full")]


def test_cron_steps_ranges_lists_names_and_either_day_rule() -> None:
    # Cron's rule: day-of-month and day-of-week both restricted fire on either.
    rule = [(INC, "UTC", "0 6,18 1 * mon-tue")]
    assert [at for at, _ in run(rule, utc(2026, 11, 28), 6)] == [
        "2026-11-30T06:00Z", "2026-11-30T18:00Z",   # Monday
        "2026-12-01T06:00Z", "2026-12-01T18:00Z",   # the 1st (and a Tuesday)
        "2026-12-07T06:00Z", "2026-12-07T18:00Z",   # Monday
    ]
    assert [at for at, _ in run([(INC, "UTC", "*/20 3 * * *")], utc(2026, 1, 1), 3)] == [
        "2026-01-01T03:00Z", "2026-01-01T03:20Z", "2026-01-01T03:40Z"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cron_text": "0 2 * *"}, "has 4 fields; it needs 5"),
    ({"cron_text": "61 2 * * *"}, "61 is outside 0-59"),
    ({"cron_text": "0 2 * * funday"}, "'funday' is not a number"),
    ({"cron_text": "0 0 30 2 *"}, "never fires"),
    ({"rrule_text": "BYHOUR=2;BYMINUTE=0"}, "has no frequency: add FREQ=DAILY"),
    ({"rrule_text": "FREQ=MINUTELY"}, "at most hourly"),
    ({"rrule_text": "FREQ=DAILY;BYHOUR=99"}, "not valid RFC 5545"),
])
def test_invalid_rules_say_what_to_fix(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidSchedule, match=message):
        compile_rule(INC, "UTC", **kwargs)  # type: ignore[arg-type]


def test_unknown_timezone_is_refused_with_an_example() -> None:
    with pytest.raises(InvalidSchedule, match=r"unknown timezone 'Europe/Berlni'.*IANA"):
        zone("Europe/Berlni")


def test_window_across_midnight_and_its_next_opening() -> None:
    window = Window(time(22, 0), time(6, 0), zone("Europe/Berlin"))
    assert window.contains(utc(2026, 11, 21, 1, 0))        # 02:00 local
    assert not window.contains(utc(2026, 11, 21, 12, 0))   # 13:00 local
    assert window.next_open(utc(2026, 11, 21, 12, 0)) == utc(2026, 11, 21, 21, 0)
    assert window.next_open(utc(2026, 11, 21, 1, 0)) == utc(2026, 11, 21, 1, 0)
