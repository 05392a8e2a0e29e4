"""Webhooks on the real stack: events are CloudEvents signed the Standard Webhooks way,
delivered by the workers after the commit that made them, exactly once per event to a
receiver that answers, retried with backoff when it does not, and a webhook whose deliveries
keep failing is disabled with the reason. A receiver that is down does not slow backups, and
webhooks may not point into the cloud's private networks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import start_failing_backup
from tests.support.redis_server import free_port
from tests.support.rounds import metrics_port, wait_rounds
from tests.support.stack import Stack
from tests.support.webhook_receiver import Received, Receiver

pytestmark = pytest.mark.ceph


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


@pytest.fixture
def project() -> dict[str, str]:
    return {"X-Project-Id": f"hooks-{uuid.uuid4().hex[:8]}", "X-Roles": "member"}


def _webhook(stack: Stack, headers: dict[str, str], url: str, **extra: Any) -> dict[str, Any]:
    made = stack.post("/v1/webhooks", {"url": url, **extra}, headers)
    assert made.status_code == 201, made.text
    created: dict[str, Any] = made.json()
    assert created["secret"].startswith("whsec_")
    return created


def _verified(secret: str, request: Received) -> dict[str, Any]:
    """What a receiver does, in the few lines docs/operations.md shows."""
    msg_id = request.headers["webhook-id"]
    timestamp = request.headers["webhook-timestamp"]
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, f"{msg_id}.{timestamp}.".encode() + request.body,
                                         hashlib.sha256).digest()).decode()
    given = [part.removeprefix("v1,") for part in request.headers["webhook-signature"].split()]
    assert any(hmac.compare_digest(expected, sig) for sig in given), request.headers
    assert abs(time.time() - int(timestamp)) < 300
    event: dict[str, Any] = json.loads(request.body)
    assert event["id"] == msg_id
    return event


def _deliveries(stack: Stack, headers: dict[str, str], hook_id: str) -> list[dict[str, Any]]:
    answer = stack.get(f"/v1/webhooks/{hook_id}/deliveries", headers)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["deliveries"])


def _wait_deliveries(stack: Stack, headers: dict[str, str], hook_id: str, *,
                     status: str, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        found = [d for d in _deliveries(stack, headers, hook_id) if d["status"] == status]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


# Exactly once: an attempt claims its delivery by a guarded update, on each database.
@pytest.mark.both_databases
def test_a_backup_and_a_failed_backup_each_send_one_signed_event(
        stack: Stack, receiver: Receiver, project: dict[str, str],
        volumes_pool: rados.Ioctx, images: list[str]) -> None:
    hook = _webhook(stack, project, receiver.url,
                    event_types=["backup.create.end", "backup.create.error", "plan.create.end"])
    good = ceph.unique_name("hooked")
    images.append(good)
    rbd.RBD().create(volumes_pool, good, 4 * MiB + 4096)
    with rbd.Image(volumes_pool, good) as image:
        image.write(b"x" * 8192, 0)
    plan = stack.post("/v1/plans", {"name": "nightly", "volumes": [f"ceph-a/volumes/{good}"],
                                    "rules": [{"cron": "0 3 * * *"}]}, project)
    assert plan.status_code == 201, plan.text
    ok = stack.wait_job(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{good}"},
                                   project).json()["id"], headers=project)
    assert ok["status"] == "succeeded", ok

    failing = start_failing_backup(lambda path, body: stack.post(path, body, project),
                                   stack.worker, volumes_pool)
    failed = stack.wait_job(failing, headers=project)
    assert failed["status"] == "failed", failed

    got = receiver.wait_for(3)
    # Nothing more comes, one event each: every delivery has ended, and the scheduler has
    # had rounds in which to hand one out again.
    _wait_deliveries(stack, project, hook["id"], status="succeeded", count=3)
    wait_rounds(metrics_port(stack.env), 3)
    assert len(receiver.received) == 3, [r.body for r in receiver.received]
    events = {event["type"]: event for event in (_verified(hook["secret"], r) for r in got)}
    assert set(events) == {"org.openstack.cairn.plan.create.end",
                           "org.openstack.cairn.backup.create.end",
                           "org.openstack.cairn.backup.create.error"}
    done = events["org.openstack.cairn.backup.create.end"]
    assert done["specversion"] == "1.0"
    assert done["subject"] == f"ceph-a/volumes/{good}"
    assert done["data"]["backup_id"] == ok["restore_point_id"]
    assert done["data"]["tenant_id"] == project["X-Project-Id"]
    assert done["data"]["status"] == "succeeded"
    assert done["data"]["job_id"] == ok["id"]
    assert done["data"]["kind"] == "full"
    assert done["data"]["size"] == 1  # GiB, as Cinder counts
    error = events["org.openstack.cairn.backup.create.error"]
    assert error["subject"].startswith("ceph-a/volumes/gone-")
    assert error["data"]["fail_reason"] == failed["error"]["message"]
    assert error["data"]["error_code"] == failed["error"]["code"]
    assert events["org.openstack.cairn.plan.create.end"]["data"]["plan_id"] == plan.json()["id"]
    log = _deliveries(stack, project, hook["id"])
    assert {d["status"] for d in log} == {"succeeded"}
    assert {d["id"] for d in log} == {event["id"] for event in events.values()}


# Retries claim the delivery again (a guarded update): on each database.
@pytest.mark.both_databases
def test_a_receiver_that_fails_three_times_gets_the_event_once(
        stack: Stack, receiver: Receiver, project: dict[str, str]) -> None:
    receiver.answers = [500, 500, 500]
    hook = _webhook(stack, project, receiver.url)
    sent = stack.post(f"/v1/webhooks/{hook['id']}/test", {}, project)
    assert sent.status_code == 202, sent.text
    delivered = _wait_deliveries(stack, project, hook["id"], status="succeeded")
    assert delivered, _deliveries(stack, project, hook["id"])
    assert delivered[0]["attempts"] == 4
    assert delivered[0]["last_status_code"] == 200
    assert [r.status for r in receiver.received] == [500, 500, 500, 200]
    assert len({r.headers["webhook-id"] for r in receiver.received}) == 1  # one event
    for request in receiver.received:
        assert _verified(hook["secret"], request)["type"] == "org.openstack.cairn.webhook.test"
    hooked = stack.get(f"/v1/webhooks/{hook['id']}", project).json()
    assert hooked["enabled"] is True
    assert hooked["failed_deliveries"] == 0


def test_a_receiver_that_is_down_does_not_slow_backups_and_gets_disabled(
        stack: Stack, project: dict[str, str], volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    down = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    hook = _webhook(stack, project, down, event_types=["backup.create.end", "webhook.test"])
    name = ceph.random_image(volumes_pool, "hook-down", 8 * MiB, seed=5)
    images.append(name)
    job = stack.wait_job(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}"},
                                    project).json()["id"], headers=project)
    assert job["status"] == "succeeded", job
    assert job["timings"]["duration_seconds"] < 10, job["timings"]  # nobody waited on the hook

    first = _wait_deliveries(stack, project, hook["id"], status="failed")
    assert first, _deliveries(stack, project, hook["id"])
    assert first[0]["attempts"] == 4
    assert "ConnectError" in first[0]["last_error"]
    stack.post(f"/v1/webhooks/{hook['id']}/test", {}, project)
    _wait_deliveries(stack, project, hook["id"], status="failed", count=2)
    hooked = stack.get(f"/v1/webhooks/{hook['id']}", project).json()
    assert hooked["enabled"] is False
    assert "2 deliveries in a row failed" in hooked["disabled_reason"]
    assert "ConnectError" in hooked["disabled_reason"]

    # Disabled: new events are not queued for it; enabling it again forgets the failures.
    stack.wait_job(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}"},
                              project).json()["id"], headers=project)
    assert len(_deliveries(stack, project, hook["id"])) == 2
    enabled = stack.client.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": True},
                                 headers=project).json()
    assert enabled["enabled"] is True
    assert enabled["failed_deliveries"] == 0
    assert enabled["disabled_reason"] is None


def test_rotation_signs_with_both_secrets(stack: Stack, receiver: Receiver,
                                          project: dict[str, str]) -> None:
    hook = _webhook(stack, project, receiver.url)
    rotated = stack.post(f"/v1/webhooks/{hook['id']}/rotate-secret", {}, project)
    assert rotated.status_code == 200, rotated.text
    stack.post(f"/v1/webhooks/{hook['id']}/test", {}, project)
    (request,) = receiver.wait_for(1)
    _verified(hook["secret"], request)
    _verified(rotated.json()["secret"], request)
    assert len(request.headers["webhook-signature"].split()) == 2


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/",
                                 "http://10.0.0.5/hook", "https://[fd00::1]/hook",
                                 "gopher://example.org/", "http://u:p@127.0.0.1/",
                                 "http://127.0.0.1/a\nHost: evil", "http://127.0.0.1/\u0000"])
def test_webhooks_may_not_point_into_private_networks(stack: Stack, project: dict[str, str],
                                                      url: str) -> None:
    answer = stack.post("/v1/webhooks", {"url": url}, project)
    assert answer.status_code == 422, answer.text
    details = answer.json()["error"]["details"]  # the schema's list, or Cairn's own check
    fields = [d["field"] for d in details] if isinstance(details, list) else [details["field"]]
    assert fields == ["url"]
    assert stack.get("/v1/webhooks", project).json() == {"webhooks": []}


def test_webhooks_are_the_projects_own(stack: Stack, receiver: Receiver,
                                       project: dict[str, str]) -> None:
    hook = _webhook(stack, project, receiver.url, event_types=["backup.create.error"])
    other = {"X-Project-Id": "someone-else", "X-Roles": "member"}
    assert stack.get(f"/v1/webhooks/{hook['id']}", other).status_code == 404
    assert stack.post(f"/v1/webhooks/{hook['id']}/test", {}, other).status_code == 404
    assert stack.delete(f"/v1/webhooks/{hook['id']}", other).status_code == 404
    reader = {**project, "X-Roles": "reader"}
    assert stack.get(f"/v1/webhooks/{hook['id']}", reader).status_code == 200
    assert stack.post("/v1/webhooks", {"url": receiver.url}, reader).status_code == 403
    unknown = stack.post("/v1/webhooks", {"url": receiver.url, "event_types": ["nope"]}, project)
    assert unknown.status_code == 422
    assert "backup.create.end" in unknown.text
    assert stack.delete(f"/v1/webhooks/{hook['id']}", project).status_code == 204
    assert stack.get(f"/v1/webhooks/{hook['id']}", project).status_code == 404
