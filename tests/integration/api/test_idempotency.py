"""`Idempotency-Key` on the POSTs that create work: a retried request (the answer was lost
on the way) replays the first answer and makes nothing twice; a key reused for another
request is refused; racing retries make the work once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import rados

from tests.integration.api.test_errors import error_of
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import HEADERS, Stack

# Idempotency keys are claims the database arbitrates (a unique row, an in-flight
# mark): on each database.
pytestmark = [pytest.mark.ceph, pytest.mark.both_databases]


@pytest.fixture
def volume(volumes_pool: rados.Ioctx) -> Iterator[str]:
    with ceph.dense_image(volumes_pool, "idem", 4 * MiB, seed=5) as name:
        yield f"ceph-a/volumes/{name}"


def post(stack: Stack, path: str, body: Any, key: str, project: str = "project-a") -> Any:
    return stack.client.post(path, json=body, headers={**HEADERS, "X-Project-Id": project,
                                                       "Idempotency-Key": key})


def backup_jobs(stack: Stack, volume: str) -> list[str]:
    jobs = stack.get("/v1/jobs", volume=volume, kind="backup", limit=1000).json()["jobs"]
    return [j["id"] for j in jobs]


def test_a_retried_backup_replays_the_first_answer(stack: Stack, volume: str) -> None:
    key = str(uuid.uuid4())
    first = post(stack, "/v1/backups", {"volume": volume}, key)
    assert first.status_code == 202, first.text
    # Before, each retry of a POST whose answer was lost made another job.
    again = post(stack, "/v1/backups", {"volume": volume}, key)
    assert again.status_code == 202, again.text
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert "Idempotent-Replayed" not in first.headers
    assert backup_jobs(stack, volume) == [first.json()["id"]]
    # The same JSON written differently is the same request.
    spaced = stack.client.post("/v1/backups", content=f'{{ "volume" :  "{volume}" }}',
                               headers={**HEADERS, "Idempotency-Key": key,
                                        "Content-Type": "application/json"})
    assert spaced.json()["id"] == first.json()["id"]
    assert stack.wait_job(first.json()["id"])["status"] == "succeeded"


def test_a_key_reused_for_another_request_is_422(stack: Stack, volume: str) -> None:
    key = str(uuid.uuid4())
    assert post(stack, "/v1/backups", {"volume": volume}, key).status_code == 202
    err = error_of(post(stack, "/v1/backups", {"volume": volume, "kind": "full"}, key), 422)
    assert err["code"] == "idempotency_key_reused"
    err = error_of(post(stack, "/v1/plans", {"name": "p", "volumes": [volume],
                                             "rules": [{"cron": "0 2 * * *"}]}, key), 422)
    assert err["code"] == "idempotency_key_reused"
    # Keys are per project: another project's same key is its own.
    other = post(stack, "/v1/plans", {"name": f"p-{key[:8]}", "volumes": [volume],
                                      "rules": [{"cron": "0 2 * * *"}]}, key,
                 project="project-idem")
    assert other.status_code == 201, other.text
    stack.wait_job(backup_jobs(stack, volume)[0])


def test_malformed_keys_are_422(stack: Stack, volume: str) -> None:
    for key in ("has space", "x" * 256, "tab\there"):
        err = error_of(post(stack, "/v1/backups", {"volume": volume}, key), 422)
        assert "Idempotency-Key" in err["message"] or "idempotency-key" in err["message"]
    assert backup_jobs(stack, volume) == []


def test_racing_retries_make_the_work_once(stack: Stack, volume: str,
                                          volumes_pool: rados.Ioctx) -> None:
    job = stack.wait_job(stack.post("/v1/backups", {"volume": volume}).json()["id"])
    rp = job["restore_point_id"]
    key = str(uuid.uuid4())
    target = ceph.unique_name("idem-restore")
    # Nothing else makes restores unique: before, 8 racing retries made 8 restore jobs.
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(
            lambda _: post(stack, f"/v1/restore-points/{rp}/restore", {"target": target}, key),
            range(8)))
    assert {a.status_code for a in answers} <= {202, 409}, [a.text for a in answers]
    made = {a.json()["id"] for a in answers if a.status_code == 202}
    assert len(made) == 1, made
    for conflict in (a for a in answers if a.status_code == 409):
        assert conflict.json()["error"]["code"] == "idempotency_key_in_flight"
    restores = stack.get("/v1/jobs", kind="restore", limit=1000).json()["jobs"]
    assert [j["id"] for j in restores if j["restore_point_id"] == rp] == list(made)
    assert stack.wait_job(made.pop())["status"] == "succeeded"
    ceph.remove_image(volumes_pool, target)


def test_a_failed_request_records_nothing(stack: Stack, volume: str) -> None:
    key = str(uuid.uuid4())
    missing = post(stack, "/v1/backups", {"volume": "ceph-a/volumes/no-such-image"}, key)
    assert missing.status_code == 404
    # Nothing was made, so nothing is replayed: the same request fails the same way.
    assert post(stack, "/v1/backups", {"volume": "ceph-a/volumes/no-such-image"},
                key).status_code == 404
