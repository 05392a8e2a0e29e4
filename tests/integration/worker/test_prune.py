"""A prune racing a running incremental, on the real stack: the prune leaves the volume
alone while the backup holds its lock (so the incremental's base survives), and the prune
that follows the backup applies the retention; the new restore point restores exactly."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import rados
import rbd
from sqlalchemy import update

from services.base import utcnow
from services.db import Database
from services.plans.prunes import request_prune
from services.records.restore_points import RestorePoint
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import restore, restore_point, wait_for_progress
from tests.support.stack import CLOUD_ADMIN, HEADERS, PROJECT, Stack

# A prune and a backup racing for a volume's lock (a unique row), and the queued prune
# per plan (INSERT .. ON CONFLICT): locking and claims, on each database.
pytestmark = [pytest.mark.ceph, pytest.mark.both_databases]


@pytest.fixture
def volume(volumes_pool: rados.Ioctx) -> Iterator[str]:
    with ceph.dense_image(volumes_pool, "prune-race", 24 * MiB, seed=77) as name:
        yield name


def run_plan(stack: Stack, plan_id: str, kind: str = "incremental") -> dict[str, Any]:
    response = stack.post(f"/v1/plans/{plan_id}/run", {"kind": kind})
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()["jobs"][0]
    return job


def wait_no_prune_pending(stack: Stack, plan_id: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        time.sleep(0.5)  # the worker asks for the prune just after its backup's end
        prunes = stack.get("/v1/jobs", plan_id=plan_id, kind="prune").json()["jobs"]
        if all(p["status"] not in ("queued", "running") for p in prunes):
            return
        assert time.monotonic() < deadline, prunes


def status_of(stack: Stack, rp_id: str) -> int:
    return int(stack.get(f"/v1/restore-points/{rp_id}").status_code)


def test_prune_racing_an_incremental_never_deletes_what_it_builds_on(
        stack: Stack, volume: str, volumes_pool: rados.Ioctx, database_url: str,
        images: list[str]) -> None:
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("race"), "volumes": [f"ceph-a/volumes/{volume}"],
        "rules": [{"cron": "0 3 * * *"}], "retention": {"keep_last": 1}}).json()
    older = stack.wait_job(run_plan(stack, plan["id"], "full")["id"])
    base = stack.wait_job(run_plan(stack, plan["id"])["id"])
    assert (older["status"], base["status"]) == ("succeeded", "succeeded")
    deadline = time.monotonic() + 30   # the prune after `base` removes `older`
    while status_of(stack, older["restore_point_id"]) != 404:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    # A second older restore point the prune would delete if it touched the volume:
    # lock it while the next one is made, unlock it just before the race.
    stack.client.patch(f"/v1/restore-points/{base['restore_point_id']}", headers=HEADERS,
                       json={"locked_until": "2099-01-01T00:00:00Z"})
    middle = stack.wait_job(run_plan(stack, plan["id"])["id"])
    wait_no_prune_pending(stack, plan["id"])
    # Only an administrator removes a lock in force.
    stack.client.patch(f"/v1/restore-points/{base['restore_point_id']}",
                       headers=CLOUD_ADMIN, json={"locked_until": None})

    with rbd.Image(volumes_pool, volume) as image:
        image.write(ceph._Random(5).bytes(12 * MiB), 4 * MiB)
    stack.client.patch(f"/v1/plans/{plan['id']}", headers=HEADERS,
                       json={"qos_bytes_per_second": 3 * MiB})
    running = run_plan(stack, plan["id"])
    wait_for_progress(stack, running["id"], 2 * MiB)

    db = Database(database_url)
    with db.session() as session:
        request_prune(session, plan["id"], PROJECT, utcnow(), max_attempts=3)
    db.dispose()
    deadline = time.monotonic() + 30
    while True:
        prunes = stack.get("/v1/jobs", plan_id=plan["id"], kind="prune").json()["jobs"]
        raced = [p for p in prunes if p["status"] == "succeeded"
                 and "being backed up" in (p["summary"] or "")]
        if raced:
            break
        assert time.monotonic() < deadline, prunes
        time.sleep(0.2)
    # The prune ran while the incremental held the volume: it deleted nothing there.
    assert stack.get(f"/v1/jobs/{running['id']}").json()["status"] == "running"
    assert status_of(stack, base["restore_point_id"]) == 200
    assert status_of(stack, middle["restore_point_id"]) == 200

    done = stack.wait_job(running["id"])
    assert done["status"] == "succeeded", done
    new = stack.get(f"/v1/restore-points/{done['restore_point_id']}").json()
    assert (new["kind"], new["base_restore_point_id"]) == ("incremental",
                                                           middle["restore_point_id"])
    deadline = time.monotonic() + 30   # the prune after the backup applies keep_last 1
    while status_of(stack, base["restore_point_id"]) != 404 or \
            status_of(stack, middle["restore_point_id"]) != 404:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    target = ceph.unique_name("race-restored")
    images.append(target)
    restore(stack, new["id"], target)
    assert ceph.sha256_of(volumes_pool, target) == ceph.sha256_of(volumes_pool, volume,
                                                                  new["source_snapshot"])


def test_a_prune_leaves_alone_the_volumes_it_has_nothing_to_delete_on(
        stack: Stack, volume: str, volumes_pool: rados.Ioctx, database_url: str) -> None:
    """A plan-wide prune follows every backup: it must not lock (nor wait for, nor report
    busy) the volumes whose restore points the retention keeps anyway."""
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("quiet"), "volumes": [f"ceph-a/volumes/{volume}"],
        "rules": [{"cron": "0 3 * * *"}], "retention": {"keep_last": 2}}).json()
    assert stack.wait_job(run_plan(stack, plan["id"], "full")["id"])["status"] == "succeeded"
    wait_no_prune_pending(stack, plan["id"])
    running = stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{volume}", "kind": "full",
                                         "qos_bytes_per_second": 2 * MiB}).json()
    wait_for_progress(stack, running["id"], MiB)  # it holds the volume's lock now
    db = Database(database_url)
    with db.session() as session:
        request_prune(session, plan["id"], PROJECT, utcnow(), max_attempts=3)
    db.dispose()
    wait_no_prune_pending(stack, plan["id"])
    prunes = stack.get("/v1/jobs", plan_id=plan["id"], kind="prune").json()["jobs"]
    assert prunes, "no prune ran"
    assert all(p["status"] == "succeeded" for p in prunes), prunes
    assert not any("being backed up" in (p["summary"] or "") for p in prunes), prunes
    assert stack.get(f"/v1/jobs/{running['id']}").json()["status"] == "running"
    stack.client.post(f"/v1/jobs/{running['id']}/cancel", headers=HEADERS)
    stack.wait_job(running["id"])


def test_a_prune_keeps_restore_points_on_a_target_no_longer_configured(
        stack: Stack, volume: str, database_url: str) -> None:
    """A target dropped from the settings leaves its restore points behind: no worker can
    delete them, so a prune must keep them available (not strand them in `deleting`) and
    finish; they are pruned once the operator configures the target again."""
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("retired"), "volumes": [f"ceph-a/volumes/{volume}"],
        "rules": [{"cron": "0 3 * * *"}], "retention": {"keep_last": 2}}).json()
    older = stack.wait_job(run_plan(stack, plan["id"], "full")["id"])
    newer = stack.wait_job(run_plan(stack, plan["id"], "full")["id"])
    wait_no_prune_pending(stack, plan["id"])
    ids = [older["restore_point_id"], newer["restore_point_id"]]
    db = Database(database_url)

    def retarget(name: str) -> None:
        with db.session() as session:
            session.execute(update(RestorePoint).where(RestorePoint.id.in_(ids))
                            .values(target=name))

    def prune() -> dict[str, Any]:
        with db.session() as session:
            request_prune(session, plan["id"], PROJECT, utcnow(), max_attempts=3)
        wait_no_prune_pending(stack, plan["id"])
        newest: dict[str, Any] = stack.get("/v1/jobs", plan_id=plan["id"],
                                           kind="prune").json()["jobs"][0]
        return newest

    try:
        retarget("retired")
        shrunk = stack.client.patch(f"/v1/plans/{plan['id']}", headers=HEADERS,
                                    json={"retention": {"keep_last": 1}})
        assert shrunk.status_code == 200, shrunk.text
        assert prune()["status"] == "succeeded"
        assert [restore_point(stack, i)["status"] for i in ids] == ["available", "available"]
        deleted = stack.delete(f"/v1/restore-points/{ids[0]}")
        assert deleted.status_code == 503, deleted.text
        assert deleted.json()["error"]["code"] == "target_not_configured"
        assert "'retired'" in deleted.json()["error"]["message"]
    finally:
        retarget("local")
    assert prune()["status"] == "succeeded"
    db.dispose()
    assert status_of(stack, ids[0]) == 404
    assert status_of(stack, ids[1]) == 200
