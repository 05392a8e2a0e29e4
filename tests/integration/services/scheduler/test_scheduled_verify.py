"""Scheduled verification on the real stack: a plan's restore point gets a sampled verify
when its week is up and a full one when its month is up; a full verify that finds damage
marks the restore point corrupt, which then refuses restores with a clear message."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
import rados

from services.base import utcnow
from services.db import Database
from services.scheduler.verifies import request_verifies
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import restore_point
from tests.support.stack import Stack

# The scheduler's verify queries and guarded updates, on each database.
pytestmark = [pytest.mark.ceph, pytest.mark.both_databases]


def _verify_jobs(stack: Stack, plan_id: str) -> list[dict[str, Any]]:
    response = stack.get("/v1/jobs", plan_id=plan_id, kind="verify")
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return jobs


def _queue_due(stack: Stack, plan_id: str, days: float) -> int:
    """What the scheduler's verify step queues for this plan `days` from now (only this
    plan's: other tests' plans share the database)."""
    db = Database(stack.settings.database_url)
    try:
        return request_verifies(db, stack.settings, utcnow() + timedelta(days=days),
                                plan_ids=[plan_id])
    finally:
        db.dispose()


def _wait_verifies(stack: Stack, plan_id: str, count: int) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        jobs = _verify_jobs(stack, plan_id)
        if len(jobs) >= count and all(j["status"] not in ("queued", "running") for j in jobs):
            return jobs[0]  # newest first
        assert time.monotonic() < deadline, jobs
        time.sleep(0.2)


def test_plans_verify_their_restore_points_on_schedule(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    name = ceph.random_image(volumes_pool, "scheduled", 17 * MiB + 3, seed=71)
    images.append(name)
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("verifyplan"), "volumes": [f"ceph-a/volumes/{name}"],
        "rules": [{"cron": "0 3 * * *"}],
        "verify": {"sampled_every_days": 7, "sample_fraction": 0.4, "full_every_days": 30}})
    assert plan.status_code == 201, plan.text
    plan_id = plan.json()["id"]
    assert plan.json()["verify"] == {"sampled_every_days": 7, "sample_fraction": 0.4,
                                     "full_every_days": 30}
    job = stack.post(f"/v1/plans/{plan_id}/run", {}).json()["jobs"][0]
    rp_id = stack.wait_job(job["id"])["restore_point_id"]

    assert _queue_due(stack, plan_id, 1) == 0            # nothing is due on day one
    assert _queue_due(stack, plan_id, 8) == 1            # a week on: a sample
    sampled = _wait_verifies(stack, plan_id, 1)
    assert sampled["status"] == "succeeded", sampled
    # 40 % of five objects: two are read, not all five.
    assert 0 < sampled["progress"]["bytes_read"] < 17 * MiB
    rp = restore_point(stack, rp_id)
    assert rp["verification"]["mode"] == "sampled"
    assert rp["verification"]["verified_full_at"] is None

    # Damage the backup: the snapshot's object map loses object 3 (it now reads zeros).
    ceph.omit_from_snapshot_map(backups_pool, rp["backup_image"], rp["backup_snapshot"], 3)

    assert _queue_due(stack, plan_id, 31) == 1           # a month on: a full verify
    full = _wait_verifies(stack, plan_id, 2)
    assert full["status"] == "failed", full
    assert full["error"]["code"] == "data_corrupt"
    rp = restore_point(stack, rp_id)
    assert rp["verification"]["mode"] == "full"
    assert rp["verification"]["status"] == "corrupt"
    assert rp["verification"]["corrupt_objects"] == [3]
    refused = stack.post(f"/v1/restore-points/{rp_id}/restore",
                         {"target": ceph.unique_name("never")})
    assert refused.status_code == 409, refused.text
    assert "failed verification" in refused.json()["error"]["message"]
    listed = stack.get("/v1/restore-points", plan_id=plan_id).json()["restore_points"]
    assert listed[0]["verification"]["status"] == "corrupt"
    stack.delete(f"/v1/plans/{plan_id}")


def test_no_verify_is_queued_for_a_target_no_longer_configured(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """A verify of a restore point whose target the service dropped could only fail in the
    worker: the scheduler leaves it until the target is configured again."""
    name = ceph.random_image(volumes_pool, "unconfigured", 5 * MiB + 1, seed=72)
    images.append(name)
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("verifygone"), "volumes": [f"ceph-a/volumes/{name}"],
        "rules": [{"cron": "0 3 * * *"}], "verify": {"sampled_every_days": 7}}).json()
    job = stack.post(f"/v1/plans/{plan['id']}/run", {}).json()["jobs"][0]
    assert stack.wait_job(job["id"])["status"] == "succeeded"
    without = stack.settings.model_copy(update={"backup_targets": {},
                                                "default_backup_target": None})
    db = Database(stack.settings.database_url)
    try:
        later = utcnow() + timedelta(days=8)
        assert request_verifies(db, without, later, plan_ids=[plan["id"]]) == 0
        assert request_verifies(db, stack.settings, later, plan_ids=[plan["id"]]) == 1
    finally:
        db.dispose()
    assert _wait_verifies(stack, plan["id"], 1)["status"] == "succeeded"
