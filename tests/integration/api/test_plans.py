"""Plans through the API on the real stack: create, read, list, change, pause, resume,
delete; next runs; validation a user can act on; run-now backing up every volume (restored
byte for byte) and the retention that follows; quotas; the job history."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import rados
import rbd

from services.clock import set_file_clock
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import restore
from tests.support.redis_server import free_port
from tests.support.stack import BIN, CLOUD_ADMIN, HEADERS, Process, Stack

pytestmark = pytest.mark.ceph

ADMIN = CLOUD_ADMIN


@pytest.fixture
def two_volumes(volumes_pool: rados.Ioctx, images: list[str]) -> list[str]:
    names = [ceph.unique_name("plan-vol") for _ in range(2)]
    for seed, name in enumerate(names):
        ceph.make_mixed_image(volumes_pool, name, size=20 * MiB, seed=seed + 40)
        images.append(name)
    return names


def ref(image: str) -> str:
    return f"ceph-a/volumes/{image}"


def plan_body(volumes: list[str], **extra: Any) -> dict[str, Any]:
    return {"name": ceph.unique_name("plan"), "volumes": [ref(v) for v in volumes],
            "timezone": "Europe/Berlin",
            "rules": [{"kind": "incremental", "cron": "0 2 * * *"},
                      {"kind": "full", "rrule": "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0"}],
            **extra}


def create(stack: Stack, body: dict[str, Any],
           headers: dict[str, str] = HEADERS) -> dict[str, Any]:
    response = stack.post("/v1/plans", body, headers)
    assert response.status_code == 201, response.text
    plan: dict[str, Any] = response.json()
    return plan


# The plan repository: times stored and read back, lists and pages, on each database.
@pytest.mark.both_databases
def test_plan_lifecycle_and_next_runs_across_spring_forward(stack: Stack,
                                                            two_volumes: list[str]) -> None:
    plan = create(stack, plan_body(two_volumes, window={"start": "03:00", "end": "06:00"},
                                   retention={"daily": 7, "weekly": 4, "monthly": 12},
                                   qos_bytes_per_second=100 * MiB))
    assert plan["status"] == "enabled"
    assert plan["volumes"] == sorted(ref(v) for v in two_volumes)
    assert plan["next_run_at"] is not None
    assert stack.get(f"/v1/plans/{plan['id']}").json() == plan
    names = [p["name"] for p in stack.get("/v1/plans", limit=1000).json()["plans"]]
    assert plan["name"] in names

    runs = stack.get(f"/v1/plans/{plan['id']}/next-runs", count=3,
                     after="2027-03-26T12:00:00Z").json()["runs"]
    assert [(r["at"], r["local"], r["kind"], r["starts_at"]) for r in runs] == [
        # 02:00 is outside the 03:00-06:00 window: the jobs start at its opening.
        ("2027-03-27T01:00:00Z", "2027-03-27T02:00:00+01:00", "incremental",
         "2027-03-27T02:00:00Z"),
        # Spring forward: 02:00 does not exist, the slot is 03:00 CEST, in the window;
        # the Sunday full (RRULE) wins over the daily incremental (cron).
        ("2027-03-28T01:00:00Z", "2027-03-28T03:00:00+02:00", "full", "2027-03-28T01:00:00Z"),
        ("2027-03-29T00:00:00Z", "2027-03-29T02:00:00+02:00", "incremental",
         "2027-03-29T01:00:00Z"),
    ]

    changed = stack.client.patch(f"/v1/plans/{plan['id']}", headers=HEADERS,
                                 json={"window": None, "qos_bytes_per_second": None,
                                       "rules": [{"cron": "15 1 * * *", "timezone": "UTC"}]})
    assert changed.status_code == 200, changed.text
    assert changed.json()["window"] is None
    assert changed.json()["qos_bytes_per_second"] is None
    assert changed.json()["next_run_at"].endswith("01:15:00Z")

    paused = stack.post(f"/v1/plans/{plan['id']}/pause", None).json()
    assert (paused["status"], paused["next_run_at"]) == ("paused", None)
    resumed = stack.post(f"/v1/plans/{plan['id']}/resume", None).json()
    assert resumed["status"] == "enabled"
    assert resumed["next_run_at"] is not None

    other = {"X-Project-Id": "project-b", "X-Roles": "member"}
    assert stack.get(f"/v1/plans/{plan['id']}", headers=other).status_code == 404
    assert stack.delete(f"/v1/plans/{plan['id']}").status_code == 204
    assert stack.get(f"/v1/plans/{plan['id']}").status_code == 404


@pytest.mark.parametrize(("change", "status", "message"), [
    ({"rules": [{"cron": "0 25 * * *"}]}, 422, "cron hour field '25': 25 is outside 0-23"),
    ({"rules": [{"cron": "0 2 * * *", "timezone": "Mars/Olympus"}]}, 422,
     "unknown timezone 'Mars/Olympus'"),
    ({"timezone": "Europe/Berlni"}, 422, "unknown timezone 'Europe/Berlni'"),
    ({"volumes": []}, 422, "volumes: a plan protects at least one volume"),
    ({"rules": [{"rrule": "BYDAY=MO;BYHOUR=2"}]}, 422, "has no frequency: add FREQ=DAILY"),
    ({"rules": [{"cron": "0 2 * * *", "rrule": "FREQ=DAILY"}]}, 422, "not both"),
    ({"retention": {"daily": -1}}, 422, "retention.daily: Input should be greater than or "
                                        "equal to 0"),
    ({"window": {"start": "22:00", "end": "25:00"}}, 422, "window.end '25:00' is not a time"),
    ({"target": "nowhere"}, 422, "unknown backup target 'nowhere'"),
    ({"volumes": ["ceph-a/volumes/no-such-image"]}, 404, "no RBD image 'no-such-image'"),
])
def test_invalid_plans_are_refused_with_a_reason(stack: Stack, two_volumes: list[str],
                                                 change: dict[str, Any], status: int,
                                                 message: str) -> None:
    response = stack.post("/v1/plans", {**plan_body(two_volumes), **change})
    assert response.status_code == status, response.text
    assert message in response.json()["error"]["message"]


# A unique constraint: on each database.
@pytest.mark.both_databases
def test_duplicate_plan_name_is_a_conflict(stack: Stack, two_volumes: list[str]) -> None:
    body = plan_body(two_volumes)
    create(stack, body)
    response = stack.post("/v1/plans", body)
    assert response.status_code == 409
    assert "already has a plan named" in response.json()["error"]["message"]


def run_now(stack: Stack, plan_id: str, headers: dict[str, str] = HEADERS,
            **body: Any) -> list[dict[str, Any]]:
    response = stack.post(f"/v1/plans/{plan_id}/run", body, headers)
    assert response.status_code == 202, response.text
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    finished = [stack.wait_job(j["id"], headers=headers) for j in jobs]
    assert [j["status"] for j in finished] == ["succeeded"] * len(jobs), finished
    return finished


def wait_pruned(stack: Stack, plan_id: str, rp_ids: list[str]) -> list[dict[str, Any]]:
    """Wait until the restore points are gone; returns the plan's finished prunes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(stack.get(f"/v1/restore-points/{i}").status_code == 404 for i in rp_ids):
            jobs = stack.get("/v1/jobs", plan_id=plan_id, kind="prune").json()["jobs"]
            return [j for j in jobs if j["status"] in ("succeeded", "failed")]
        time.sleep(0.2)
    raise AssertionError(f"restore points {rp_ids} were not pruned")


def test_run_now_backs_up_every_volume_and_retention_prunes_the_rest(
        stack: Stack, two_volumes: list[str], volumes_pool: rados.Ioctx,
        backups_pool: rados.Ioctx, images: list[str]) -> None:
    plan = create(stack, plan_body(two_volumes, retention={"keep_last": 1}))
    first = run_now(stack, plan["id"], kind="full")
    first_rps = {j["volume"]: j["restore_point_id"] for j in first}
    assert all(j["schedule"]["plan_id"] == plan["id"] for j in first)

    with rbd.Image(volumes_pool, two_volumes[0]) as image:
        image.write(b"\x5a" * MiB, 3 * MiB)
    second = run_now(stack, plan["id"])
    prunes = wait_pruned(stack, plan["id"], list(first_rps.values()))
    assert all(p["status"] == "succeeded" for p in prunes), prunes
    assert sum(int(p["summary"].split()[1]) for p in prunes) == 2, prunes

    backup_images = {}
    for job in second:
        rp = stack.get(f"/v1/restore-points/{job['restore_point_id']}").json()
        assert (rp["kind"], rp["plan_id"], rp["status"]) == ("incremental", plan["id"],
                                                             "available")
        backup_images[rp["volume"]] = rp["backup_image"]
    for volume, rp_id in first_rps.items():
        # Pruned: gone from the API and from the backup image.
        assert stack.get(f"/v1/restore-points/{rp_id}").status_code == 404, volume
        assert ceph.snapshots(backups_pool, backup_images[volume]) == [
            f"cairn.{j['restore_point_id']}" for j in second if j["volume"] == volume]

    preview = stack.get(f"/v1/plans/{plan['id']}/retention-preview").json()
    assert sorted((i["keep"], tuple(i["kept_by"])) for i in preview["restore_points"]) == [
        (True, ("last", "newest"))] * 2

    newest = second[0]
    target = ceph.unique_name("plan-restored")
    images.append(target)
    restore(stack, newest["restore_point_id"], target)
    source = newest["volume"].split("/")[-1]
    assert ceph.sha256_of(volumes_pool, target) == ceph.sha256_of(
        volumes_pool, source, f"cairn.{newest['restore_point_id']}")


# The retention preview's queries and the plan's row lock: on each database.
@pytest.mark.both_databases
def test_an_edited_retention_shows_what_the_next_prune_would_delete_and_deletes_nothing(
        stack: Stack, two_volumes: list[str]) -> None:
    plan = create(stack, plan_body(two_volumes, retention={"keep_last": 5}))
    first = run_now(stack, plan["id"], kind="full")
    second = run_now(stack, plan["id"])
    draft = {"rules": plan["rules"], "timezone": plan["timezone"], "plan_id": plan["id"],
             "retention": {"keep_last": 1}}

    existing = stack.post("/v1/plans/preview", draft).json()["existing"]
    assert (existing["kept"], existing["pruned"]) == (2, 2), existing
    verdicts = {i["restore_point_id"]: (i["keep"], i["kept_by"])
                for i in existing["restore_points"]}
    assert verdicts == {**{j["restore_point_id"]: (False, []) for j in first},
                        **{j["restore_point_id"]: (True, ["last", "newest"]) for j in second}}
    # Newest first, each with its day on the draft's wall clock.
    times = [i["created_at"] for i in existing["restore_points"]]
    assert times == sorted(times, reverse=True)

    # The plan's own retention keeps all four; the draft changed nothing.
    draft["retention"] = plan["retention"]
    assert stack.post("/v1/plans/preview", draft).json()["existing"]["pruned"] == 0
    for job in first:
        assert stack.get(f"/v1/restore-points/{job['restore_point_id']}").json()[
            "status"] == "available"
    # Another project cannot read a plan's restore points through a draft.
    other = {"X-Project-Id": "someone-else", "X-Roles": "member"}
    refused = stack.post("/v1/plans/preview", draft, other)
    assert refused.status_code == 404, refused.text


# Quota usage is counted by queries: on each database.
@pytest.mark.both_databases
def test_quotas_refuse_run_now_and_plan_creation_with_how_much(
        stack: Stack, two_volumes: list[str]) -> None:
    project = ceph.unique_name("quota-project")
    member = {"X-Project-Id": project, "X-Roles": "member"}
    plan = create(stack, plan_body(two_volumes), member)
    run_now(stack, plan["id"], member, kind="full")

    forbidden = stack.client.put(f"/v1/quotas/{project}", headers=member,
                                 json={"restore_points": 100})
    assert forbidden.status_code == 403
    quota = stack.client.put(f"/v1/quotas/{project}", headers=ADMIN,
                             json={"restore_points": 3, "gigabytes": None})
    assert quota.status_code == 200, quota.text
    usage = stack.get("/v1/usage", headers=member).json()
    assert usage["limits"] == {"restore_points": 3, "gigabytes": None}
    assert usage["usage"]["restore_points"] == 2
    assert usage["usage"]["gigabytes_stored"] > 0

    over = stack.post(f"/v1/plans/{plan['id']}/run", {}, member)
    assert over.status_code == 413
    assert over.json()["error"]["code"] == "quota_exceeded"
    assert "2 of 3 used, this needs 2 more (1 over)" in over.json()["error"]["message"]
    refused = stack.post("/v1/plans", plan_body(two_volumes), member)
    assert refused.status_code == 413
    on_demand = stack.post("/v1/backups", {"volume": ref(two_volumes[0])}, member)
    assert on_demand.status_code == 202  # one more fits: 3 of 3
    stack.wait_job(on_demand.json()["id"], headers=member)


# The job repository's filters and pages: on each database.
@pytest.mark.both_databases
def test_job_history_filters_and_pages(stack: Stack, two_volumes: list[str]) -> None:
    plan = create(stack, plan_body(two_volumes))
    jobs = run_now(stack, plan["id"], kind="full")
    listed = stack.get("/v1/jobs", plan_id=plan["id"], kind="backup").json()["jobs"]
    assert sorted(j["id"] for j in listed) == sorted(j["id"] for j in jobs)
    page = stack.get("/v1/jobs", plan_id=plan["id"], kind="backup", limit=1).json()
    assert len(page["jobs"]) == 1
    rest = stack.get("/v1/jobs", plan_id=plan["id"], kind="backup", limit=1,
                     marker=page["next_marker"]).json()
    assert {page["jobs"][0]["id"], rest["jobs"][0]["id"]} == {j["id"] for j in jobs}
    assert rest["next_marker"] is None
    one = stack.get("/v1/jobs", volume=jobs[0]["volume"], status="succeeded",
                    plan_id=plan["id"], kind="backup").json()["jobs"]
    assert [j["id"] for j in one] == [jobs[0]["id"]]
    assert stack.get("/v1/jobs", plan_id=plan["id"], status="failed").json()["jobs"] == []
    assert stack.get("/v1/jobs", plan_id=plan["id"],
                     since="2099-01-01T00:00:00Z").json()["jobs"] == []
    naive = stack.get("/v1/jobs", since="2026-01-01T00:00:00")
    assert naive.status_code == 422
    assert "needs a timezone" in naive.json()["error"]["message"]


def test_the_api_reads_the_schedulers_clock(stack: Stack, two_volumes: list[str],
                                            tmp_path: Path) -> None:
    """With CAIRN_CLOCK_FILE (how tests move a scheduler through days), the API's next runs
    and plan checks use the same time as the scheduler, not the machine's."""
    clock = tmp_path / "clock"
    set_file_clock(clock, datetime(2027, 6, 1, 12, 0, tzinfo=UTC))
    port = free_port()
    api = Process("cairn-api", [str(BIN / "cairn-api"), "--port", str(port)],
                  {**stack.env, "CAIRN_CLOCK_FILE": str(clock)}, tmp_path / "api.log")
    api.start("Uvicorn running")
    try:
        url = f"http://127.0.0.1:{port}"
        made = httpx.post(f"{url}/v1/plans", json=plan_body(two_volumes), headers=HEADERS)
        assert made.status_code == 201, made.text
        runs = httpx.get(f"{url}/v1/plans/{made.json()['id']}/next-runs",
                         params={"count": 1}, headers=HEADERS).json()["runs"]
        # 02:00 Berlin (CEST) after the clock's 2027-06-01 12:00 UTC, not after today.
        assert runs[0]["at"].startswith("2027-06-02T00:00:00"), runs
        httpx.delete(f"{url}/v1/plans/{made.json()['id']}", headers=HEADERS)
    finally:
        api.stop()
