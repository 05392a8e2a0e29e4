"""The Overview's figures on the real stack: a plan's volumes fall behind once their newest
restore point is older than 1.5 times the plan's interval (a volume never backed up too),
paused plans count for nothing, and the next runs come from the enabled plans."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import rados

from services.clock import set_file_clock
from tests.integration.api.test_plans import create, ref, run_now
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.redis_server import free_port
from tests.support.stack import BIN, Process, Stack

# The Overview's figures are aggregate queries: on each database.
pytestmark = [pytest.mark.ceph, pytest.mark.both_databases]


def test_volumes_fall_behind_their_plan_and_the_next_runs_are_listed(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], tmp_path: Path) -> None:
    project = {"X-Project-Id": ceph.unique_name("overview"), "X-Roles": "member"}
    names = [ceph.unique_name("overview-vol") for _ in range(3)]
    for seed, name in enumerate(names):
        ceph.make_mixed_image(volumes_pool, name, size=20 * MiB, seed=seed + 70)
        images.append(name)
    hourly = create(stack, {"name": "hourly", "volumes": [ref(n) for n in names[:2]],
                            "rules": [{"kind": "incremental", "cron": "0 * * * *"}]}, project)
    backed_up = {j["volume"]: j for j in run_now(stack, hourly["id"], project, kind="full")}
    never = create(stack, {"name": "never-ran", "volumes": [ref(names[2])],
                           "rules": [{"kind": "full", "cron": "30 * * * *"}]}, project)
    paused = create(stack, {"name": "paused", "volumes": [ref(names[2])], "enabled": False,
                            "rules": [{"kind": "full", "cron": "15 * * * *"}]}, project)

    now = stack.get("/v1/overview", project).json()
    assert now["stale"] == [], now
    assert now["volumes"] is None  # no Cinder in this stack: nothing to count against
    runs = now["next_runs"]
    half_past_first = datetime.fromisoformat(now_at := runs[0]["at"]).minute == 30
    assert [r["plan_name"] for r in runs[:2]] == (
        ["never-ran", "hourly"] if half_past_first else ["hourly", "never-ran"]), now_at
    assert [r["at"] for r in runs] == sorted(r["at"] for r in runs)
    assert paused["id"] not in {r["plan_id"] for r in runs}
    assert {r["volumes"] for r in runs if r["plan_id"] == hourly["id"]} == {2}

    # Three hours later (the API's clock moved by CAIRN_CLOCK_FILE): every volume is behind,
    # the one never backed up first.
    later = _overview_at(stack, project, datetime.now(UTC) + timedelta(hours=3), tmp_path)
    stale = later["stale"]
    assert stale[0]["volume"] == ref(names[2]), stale
    assert {s["volume"] for s in stale} == {ref(n) for n in names}
    by_volume = {s["volume"]: s for s in stale}
    assert by_volume[ref(names[2])]["newest_at"] is None
    assert by_volume[ref(names[2])]["plan_id"] == never["id"]
    for volume, job in backed_up.items():
        rp = stack.get(f"/v1/restore-points/{job['restore_point_id']}", project).json()
        assert by_volume[volume]["newest_at"] == rp["created_at"]
        assert (by_volume[volume]["plan_id"], by_volume[volume]["interval_seconds"]) == (
            hourly["id"], 3600)

    # Paused, the hourly plan's volumes are no longer expected to keep up.
    assert stack.post(f"/v1/plans/{hourly['id']}/pause", {}, project).status_code == 200
    later = _overview_at(stack, project, datetime.now(UTC) + timedelta(hours=3), tmp_path)
    assert [s["volume"] for s in later["stale"]] == [ref(names[2])]


def _overview_at(stack: Stack, headers: dict[str, str], at: datetime,
                 tmp_path: Path) -> Any:
    clock = tmp_path / "clock"
    set_file_clock(clock, at)
    port = free_port()
    api = Process("cairn-api", [str(BIN / "cairn-api"), "--port", str(port)],
                  {**stack.env, "CAIRN_CLOCK_FILE": str(clock)}, tmp_path / f"api-{port}.log")
    api.start("Uvicorn running")
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/v1/overview", headers=headers)
        assert response.status_code == 200, response.text
        return response.json()
    finally:
        api.stop()
