"""Webhooks on the real stack: events are CloudEvents signed the Standard Webhooks way,
delivered by the workers after the commit that made them, exactly once per event to a
receiver that answers, retried with backoff when it does not, and a webhook whose deliveries
keep failing is disabled with the reason. A receiver that is down does not slow backups, and
webhooks may not point into the cloud's private networks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import rados
import rbd
import sqlalchemy
from fastapi.testclient import TestClient

from api.main import create_app
from services.webhooks import addresses
from tests.support import ceph, scripted_dns
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
    assert first[0]["last_error"] == "connection refused"  # a category, not the error's text
    stack.post(f"/v1/webhooks/{hook['id']}/test", {}, project)
    _wait_deliveries(stack, project, hook["id"], status="failed", count=2)
    hooked = stack.get(f"/v1/webhooks/{hook['id']}", project).json()
    assert hooked["enabled"] is False
    assert "2 deliveries in a row failed" in hooked["disabled_reason"]
    assert "the last: connection refused." in hooked["disabled_reason"]

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


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/", "http://10.0.0.5/hook", "https://[fd00::1]/hook",
    "gopher://example.org/", "http://u:p@127.0.0.1/", "http://127.0.0.1/a\nHost: evil",
    "http://127.0.0.1/\u0000",
    # IPv6 forms that reach an internal IPv4 address through a translator or tunnel, and
    # site-local IPv6, which Python counts as global.
    "http://[64:ff9b::a9fe:a9fe]/", "http://[::a9fe:a9fe]/", "http://[::ffff:0:a00:5]/",
    "http://[2002:a9fe:a9fe::1]/", "http://[2001:0:4136:e378:8000:63bf:f5ff:fffa]/",
    "http://[fec0::1]/", "http://[64:ff9b:1::a00:5]/",
    # Port 0 is no port (a client library reads it as the scheme's default, or worse).
    "http://8.8.8.8:0/hook", "https://[2606:4700:4700::1111]:0/"])
def test_webhooks_may_not_point_into_private_networks(stack: Stack, project: dict[str, str],
                                                      url: str) -> None:
    answer = stack.post("/v1/webhooks", {"url": url}, project)
    assert answer.status_code == 422, answer.text
    details = answer.json()["error"]["details"]  # the schema's list, or Cairn's own check
    fields = [d["field"] for d in details] if isinstance(details, list) else [details["field"]]
    assert fields == ["url"]
    assert stack.get("/v1/webhooks", project).json() == {"webhooks": []}


def test_a_refusal_names_nothing_a_name_resolved_to(stack: Stack, project: dict[str, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor whether it resolved: a tenant learns no internal address or name from a 422."""
    resolve, _ = scripted_dns.scripted({"names": {
        "db.internal.test": [["10.20.30.40"]], "mixed.internal.test": [["8.8.8.8", "::1"]]}})
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    messages = set()
    for host in ("db.internal.test", "mixed.internal.test", "nothing.internal.test"):
        answer = stack.post("/v1/webhooks", {"url": f"https://{host}/hook"}, project)
        assert answer.status_code == 422, answer.text
        messages.add(answer.json()["error"]["message"].replace(host, "HOST"))
    (message,) = messages
    assert "10.20.30.40" not in message
    assert "::1" not in message


def test_the_delivery_log_shows_what_happened_not_what_the_receiver_said(
        stack: Stack, receiver: Receiver, project: dict[str, str]) -> None:
    """An allowed internal receiver's answer, its address and the error's text stay out of
    what the tenant reads: the log says "HTTP 500"."""
    receiver.answers = [500, 500, 500, 500]
    receiver.body = b"internal-only: db password hunter2 at 10.1.2.3"
    hook = _webhook(stack, project, receiver.url)
    stack.post(f"/v1/webhooks/{hook['id']}/test", {}, project)
    (failed,) = _wait_deliveries(stack, project, hook["id"], status="failed")
    assert (failed["last_status_code"], failed["last_error"]) == (500, "HTTP 500")
    hooked = stack.get(f"/v1/webhooks/{hook['id']}", project).json()
    assert "hunter2" not in json.dumps(hooked)


def test_redirects_are_never_followed(stack: Stack, receiver: Receiver,
                                      project: dict[str, str]) -> None:
    elsewhere = Receiver()
    try:
        receiver.answers = [302] * 4
        receiver.headers = {"Location": elsewhere.url}
        hook = _webhook(stack, project, receiver.url)
        stack.post(f"/v1/webhooks/{hook['id']}/test", {}, project)
        (failed,) = _wait_deliveries(stack, project, hook["id"], status="failed")
        assert failed["last_error"] == "HTTP 302 (redirects are not followed)"
        assert len(receiver.received) == 4
        assert elsewhere.connections == 0
    finally:
        elsewhere.close()


def test_webhooks_are_the_projects_own(stack: Stack, receiver: Receiver,
                                       project: dict[str, str]) -> None:
    """Another project's member finds none of it on any route (the same 404 as a webhook
    that does not exist); a reader sees it and changes nothing."""
    hook = _webhook(stack, project, receiver.url, event_types=["backup.create.error"])
    other = {"X-Project-Id": f"someone-else-{uuid.uuid4().hex[:6]}", "X-Roles": "admin,member"}
    path = f"/v1/webhooks/{hook['id']}"
    assert stack.get(path, other).status_code == 404
    assert stack.get(f"{path}/deliveries", other).status_code == 404
    assert stack.client.patch(path, headers=other, json={"enabled": False}).status_code == 404
    assert stack.post(f"{path}/test", {}, other).status_code == 404
    assert stack.post(f"{path}/rotate-secret", {}, other).status_code == 404
    assert stack.delete(path, other).status_code == 404
    assert hook["id"] not in {h["id"] for h in stack.get("/v1/webhooks", other).json()[
        "webhooks"]}
    assert stack.get(path, project).json()["enabled"] is True
    reader = {**project, "X-Roles": "reader"}
    assert stack.get(path, reader).status_code == 200
    assert stack.post("/v1/webhooks", {"url": receiver.url}, reader).status_code == 403
    unknown = stack.post("/v1/webhooks", {"url": receiver.url, "event_types": ["nope"]}, project)
    assert unknown.status_code == 422
    assert "backup.create.end" in unknown.text
    assert stack.delete(path, project).status_code == 204
    assert stack.get(path, project).status_code == 404


def test_readers_see_a_webhooks_host_not_its_url(stack: Stack, receiver: Receiver,
                                                 project: dict[str, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor the parts of its host name that may be the receiver's token: a name shows by
    its last two labels (`*.receivers.test`), an address as it is."""
    resolve, _ = scripted_dns.scripted({"names": {
        "eo1a2b3c4d.m.receivers.test": [["127.0.0.1"]]}})
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    for url, host in (
            (f"{receiver.url}?token=receiver-bearer-secret", f"http://127.0.0.1:{receiver.port}"),
            (f"http://eo1a2b3c4d.m.receivers.test:{receiver.port}/hook",
             f"http://*.receivers.test:{receiver.port}")):
        hook = _webhook(stack, project, url)
        assert hook["url"] == url
        reader = {**project, "X-Roles": "reader"}
        shown = stack.get(f"/v1/webhooks/{hook['id']}", reader).json()
        (listed,) = stack.get("/v1/webhooks", reader).json()["webhooks"]
        for seen in (shown, listed):
            assert seen["url"] is None
            assert seen["url_host"] == host
            assert "receiver-bearer-secret" not in json.dumps(seen)
            assert "eo1a2b3c4d" not in json.dumps(seen)
        assert stack.get(f"/v1/webhooks/{hook['id']}", project).json()["url"] == url
        stack.delete(f"/v1/webhooks/{hook['id']}", project)


def test_networks_the_operator_refuses_win_over_allowed_ones(
        stack: Stack, receiver: Receiver, project: dict[str, str]) -> None:
    """The cloud's own public addresses (CAIRN_WEBHOOK_REFUSED_NETWORKS) are refused even
    inside an allowed network (the stack allows 127.0.0.0/8)."""
    refusing = stack.settings.model_copy(update={
        "webhook_refused_networks": [ipaddress.ip_network("127.0.0.1/32")]})
    with TestClient(create_app(refusing)) as api:
        answer = api.post("/v1/webhooks", json={"url": receiver.url}, headers=project)
        assert answer.status_code == 422, answer.text
        assert "does not resolve to a public address" in answer.json()["error"]["message"]
        elsewhere = receiver.url.replace("127.0.0.1", "127.0.0.2")
        assert api.post("/v1/webhooks", json={"url": elsewhere},
                        headers=project).status_code == 201


def _rows(stack: Stack, sql: str, **params: Any) -> str:
    """Every column of the rows, as text: what a database dump would show."""
    engine = sqlalchemy.create_engine(stack.settings.database_url)
    try:
        with engine.connect() as db:
            return repr([tuple(row) for row in db.execute(sqlalchemy.text(sql), params)])
    finally:
        engine.dispose()


def test_signing_secrets_are_stored_sealed(stack: Stack, receiver: Receiver,
                                           project: dict[str, str]) -> None:
    hook = _webhook(stack, project, receiver.url)
    secret = hook["secret"]
    rotated = stack.post(f"/v1/webhooks/{hook['id']}/rotate-secret", {}, project).json()["secret"]
    stored = _rows(stack, "SELECT * FROM webhooks WHERE id = :id", id=hook["id"])
    assert hook["id"] in stored
    for plain in (secret, rotated):
        assert plain.removeprefix("whsec_") not in stored
    # Still the secrets that sign: sealed, not lost.
    stack.post(f"/v1/webhooks/{hook['id']}/test", {}, project)
    (request,) = receiver.wait_for(1)
    _verified(secret, request)
    _verified(rotated, request)


def test_a_retried_creation_makes_one_webhook_and_answers_the_first_secret(
        stack: Stack, receiver: Receiver, project: dict[str, str]) -> None:
    keyed = {**project, "Idempotency-Key": str(uuid.uuid4())}
    body = {"url": receiver.url, "event_types": ["webhook.test"]}
    first = stack.post("/v1/webhooks", body, keyed)
    again = stack.post("/v1/webhooks", body, keyed)
    assert (first.status_code, again.status_code) == (201, 201), (first.text, again.text)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == first.json()  # the secret too: the first answer may be lost
    assert len(stack.get("/v1/webhooks", project).json()["webhooks"]) == 1
    other = stack.post("/v1/webhooks", {**body, "event_types": []}, keyed)
    assert other.status_code == 422, other.text
    reader = {**keyed, "X-Roles": "reader"}
    assert stack.post("/v1/webhooks", body, reader).status_code == 403  # no replay for them
    kept = _rows(stack, "SELECT * FROM idempotent_requests WHERE key = :key",
                 key=keyed["Idempotency-Key"])
    assert first.json()["id"] in kept
    assert first.json()["secret"].removeprefix("whsec_") not in kept  # kept sealed


def test_a_replay_never_shows_a_secret_after_its_rotation_or_its_webhooks_delete(
        stack: Stack, receiver: Receiver, project: dict[str, str]) -> None:
    """The replay of a creation answers its secret only while the webhook still signs with
    it as its current secret: a rotation or a delete ends that (409), within the 24 h."""
    body = {"url": receiver.url, "event_types": ["webhook.test"]}
    for then in ("rotate", "delete"):
        keyed = {**project, "Idempotency-Key": str(uuid.uuid4())}
        first = stack.post("/v1/webhooks", body, keyed)
        assert first.status_code == 201, first.text
        hook = first.json()["id"]
        assert stack.post("/v1/webhooks", body, keyed).json()["secret"] == \
            first.json()["secret"]
        if then == "rotate":
            assert stack.post(f"/v1/webhooks/{hook}/rotate-secret", {},
                              project).status_code == 200
        else:
            assert stack.delete(f"/v1/webhooks/{hook}", project).status_code == 204
        again = stack.post("/v1/webhooks", body, keyed)
        assert again.status_code == 409, again.text
        assert first.json()["secret"] not in again.text
        assert ("rotated" if then == "rotate" else "deleted") in \
            again.json()["error"]["message"]


def test_names_that_never_resolve_hold_a_bounded_number_of_threads(
        stack: Stack, project: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The C library's resolver cannot be interrupted: a lookup outlives the request that
    gave up on it. At most LOOKUPS of them run in a process; past that a save is refused
    at once (503, try again) instead of leaving one more thread behind."""
    release = threading.Event()
    real = socket.getaddrinfo

    def never(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host).endswith(".never.test"):
            release.wait(30)
            raise socket.gaierror(socket.EAI_AGAIN, "no answer")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", never)
    monkeypatch.setattr(addresses, "RESOLVE_SECONDS", 0.2)
    monkeypatch.setattr(addresses, "LOOKUPS", 3, raising=False)
    monkeypatch.setattr(addresses, "_lookups", threading.BoundedSemaphore(3), raising=False)
    try:
        for number in range(3):
            answer = stack.post("/v1/webhooks", {"url": f"https://n{number}.never.test/"},
                                project)
            assert answer.status_code == 422, answer.text
        started = time.monotonic()
        busy = stack.post("/v1/webhooks", {"url": "https://n3.never.test/"}, project)
        assert busy.status_code == 503, busy.text
        assert time.monotonic() - started < 0.2
        lookups = [t for t in threading.enumerate() if t.name == "webhook-resolve"]
        assert len(lookups) == 3
    finally:
        release.set()
