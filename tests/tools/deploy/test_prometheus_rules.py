"""Cairn's alert rules (deploy/prometheus/alerts.yml) with Prometheus's own tool: they
load, and their unit tests (tests/alerts_test.yml) pass, with every alert seen both firing
and staying quiet."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

RULES_DIR = Path(__file__).resolve().parents[3] / "deploy" / "prometheus"


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: `make test` installs Debian's prometheus package"
    return found


def test_rules_load(promtool: str) -> None:
    done = subprocess.run([promtool, "check", "rules", str(RULES_DIR / "alerts.yml")],
                          check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_rule_unit_tests_pass(promtool: str) -> None:
    done = subprocess.run([promtool, "test", "rules", "tests/alerts_test.yml"],
                          check=False, capture_output=True, text=True, cwd=RULES_DIR)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_test_that_sees_it_fire() -> None:
    rules = yaml.safe_load((RULES_DIR / "alerts.yml").read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]
              if "alert" in rule}
    tests = yaml.safe_load((RULES_DIR / "tests" / "alerts_test.yml").read_text())
    fired = {case["alertname"] for test in tests["tests"]
             for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    quiet = {case["alertname"] for test in tests["tests"]
             for case in test.get("alert_rule_test", []) if not case.get("exp_alerts")}
    assert alerts, rules
    assert alerts - fired == set(), "alerts no test sees firing"
    assert alerts - quiet == set(), "alerts no test sees staying quiet when they should"
