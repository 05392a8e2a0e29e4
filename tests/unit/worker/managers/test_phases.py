"""Phase laps as pure logic: time goes to the phase named after it, recurring phases add
up, and a part a step measured itself moves to its own phase."""

from __future__ import annotations

import json
import time

from worker.managers.phases import Phases


def test_laps_charge_the_time_since_the_last_one() -> None:
    phases = Phases(queue_wait=2.0, claim=0.01)
    time.sleep(0.02)
    phases.lap("open")
    phases.lap("snapshot")
    time.sleep(0.01)
    phases.lap("open")
    assert phases.seconds["open"] >= 0.03
    assert phases.seconds["snapshot"] < 0.01
    assert json.loads(phases.to_json())["queue_wait"] == 2.0


def test_a_measured_part_moves_to_its_phase_and_never_below_zero() -> None:
    phases = Phases()
    phases.seconds["plan"] = 5.0
    phases.move("plan", "copy", 4.5)
    assert phases.seconds == {"plan": 0.5, "copy": 4.5}
    phases.move("plan", "copy", 9.0)  # more than was charged: all of it, no negative time
    assert phases.seconds == {"plan": 0.0, "copy": 5.0}


def test_restart_leaves_the_time_before_it_out() -> None:
    phases = Phases()
    time.sleep(0.02)
    phases.restart()
    phases.lap("clone")
    assert phases.seconds["clone"] < 0.02
