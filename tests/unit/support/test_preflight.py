"""The run's start refuses a cluster that cannot take the tests' data, naming it: a memstore
OSD above 80 % of its cap, Ceph's own full and nearfull checks, a paused or down OSD
(tests/support/preflight.py). The same check against the real clusters runs in
tests/integration/support/test_preflight.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.preflight import cluster_problem, wanted

GiB = 1 << 30


def stores(used: float, total: float = 4) -> dict[int, tuple[int, int]]:
    return {0: (int(used * GiB), int(total * GiB))}


HEALTHY: dict[str, Any] = {"status": "HEALTH_OK", "checks": {}}


def test_a_cluster_with_room_is_fit() -> None:
    assert cluster_problem("ceph-a", stores(1.2), HEALTHY) is None
    assert cluster_problem("ceph-a", stores(3.2), HEALTHY) is None  # exactly 80 %


def test_a_store_above_80_percent_is_refused_with_its_name_and_what_to_do() -> None:
    problem = cluster_problem("ceph-b", stores(3.3), HEALTHY)
    assert problem is not None
    assert problem.startswith("ceph-b: osd.0 holds 3.30 of 4.00 GiB (82 %")
    assert "make down" in problem


@pytest.mark.parametrize("check", ["OSD_FULL", "OSD_NEARFULL", "POOL_FULL", "OSDMAP_FLAGS",
                                   "OSD_DOWN", "PG_AVAILABILITY"])
def test_cephs_own_checks_refuse_a_cluster_whatever_its_figures(check: str) -> None:
    health = {"status": "HEALTH_WARN", "checks": {
        check: {"severity": "HEALTH_WARN", "summary": {"message": "1 thing wrong"}}}}
    problem = cluster_problem("ceph-a", stores(0.1), health)
    assert problem is not None
    assert problem.startswith(f"ceph-a: Ceph reports {check} (1 thing wrong: ")


def test_other_warnings_do_not_stop_a_run() -> None:
    health = {"status": "HEALTH_WARN", "checks": {"POOL_NO_REDUNDANCY": {"summary": {}}}}
    assert cluster_problem("ceph-a", stores(0.5), health) is None


def test_only_runs_that_reach_the_integration_tier_check_the_stack(tmp_path: Path) -> None:
    root = tmp_path
    assert wanted([], root, root)  # testpaths: every tier
    assert wanted(["tests"], root, root)
    assert wanted(["tests/integration/api/test_plans.py::test_x"], root, root)
    assert wanted(["integration"], root / "tests", root)
    assert not wanted(["tests/unit"], root, root)
    assert not wanted(["tests/tools/deploy/test_helm_chart.py"], root, root)
