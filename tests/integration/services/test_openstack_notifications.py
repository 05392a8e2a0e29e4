"""OpenStack notifications on the stack's real RabbitMQ, through oslo.messaging's
`messagingv2` driver, in Cinder's shape: a backup that succeeds and one that fails each
make exactly one `backup.create.start` and one end notification (publisher `cairn.<host>`,
`backup.create.end` on the info queue, `backup.create.error` on the error queue), read back
from RabbitMQ as a consumer such as Ceilometer would."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rados
import rbd
from kombu import Connection

from services.webhooks.outbox import RESEND_AFTER
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import start_failing_backup
from tests.support.stack import Stack, start_stack, stop_stack
from tests.support.workers import RedisDb, redis_db

pytestmark = pytest.mark.ceph

RABBIT_PORT = int(os.environ.get("CAIRN_RABBIT_PORT", "31672"))
RABBIT = f"amqp://guest:guest@127.0.0.1:{RABBIT_PORT}//"
REDIS_DB = redis_db(RedisDb.SCRATCH)


@pytest.fixture
def topic() -> str:
    return f"cairn_test_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def notifying(fresh_database_url: str, topic: str, tmp_path: Path) -> Iterator[Stack]:
    """A stack of its own whose workers notify on the topic."""
    stack = start_stack(fresh_database_url, REDIS_DB, tmp_path / "logs",
                        CAIRN_NOTIFICATION_DRIVER="messagingv2",
                        CAIRN_NOTIFICATION_TRANSPORT_URL=(
                            f"rabbit://guest:guest@127.0.0.1:{RABBIT_PORT}/"),
                        CAIRN_NOTIFICATION_TOPICS=json.dumps([topic]))
    yield stack
    stop_stack(stack)


def _drain(topic: str, priority: str, want: int, timeout: float = 30) -> list[dict[str, Any]]:
    """The notifications on `<topic>.<priority>` (the queue oslo.messaging declares)."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    with Connection(RABBIT, connect_timeout=10) as conn:
        channel = conn.default_channel
        while time.monotonic() < deadline:
            try:
                message = channel.basic_get(queue=f"{topic}.{priority}", no_ack=True)
            except Exception:  # the queue appears with the first notification
                conn.close()
                conn.connect()
                channel = conn.default_channel
                message = None
            if message is None:
                if len(found) >= want:
                    time.sleep(1.0)  # ...and then no more
                    if channel.basic_get(queue=f"{topic}.{priority}", no_ack=True) is None:
                        return found
                time.sleep(0.2)
                continue
            envelope = json.loads(message.body)
            assert envelope["oslo.version"] == "2.0"
            found.append(json.loads(envelope["oslo.message"]))
    return found


def test_backups_notify_in_cinders_shape(notifying: Stack, topic: str,
                                         volumes_pool: rados.Ioctx,
                                         images: list[str]) -> None:
    project = {"X-Project-Id": f"notify-{uuid.uuid4().hex[:6]}", "X-Roles": "member"}
    good = ceph.unique_name("notified")
    images.append(good)
    rbd.RBD().create(volumes_pool, good, 4 * MiB + 512)
    plan = notifying.post("/v1/plans", {"name": "nightly", "volumes": [
        f"ceph-a/volumes/{good}"], "rules": [{"cron": "0 3 * * *"}]}, project)
    assert plan.status_code == 201, plan.text
    ok = notifying.wait_job(notifying.post("/v1/backups", {"volume": f"ceph-a/volumes/{good}"},
                                           project).json()["id"], headers=project)
    assert ok["status"] == "succeeded", ok

    failing = start_failing_backup(lambda path, body: notifying.post(path, body, project),
                                   notifying.worker, volumes_pool)
    failed = notifying.wait_job(failing, headers=project)
    assert failed["status"] == "failed", failed

    # The worker is stopped and started again inside `start_failing_backup`: a notification
    # its senders had taken then is sent again once its claim lapses (RESEND_AFTER, 60 s).
    info = _drain(topic, "info", want=4, timeout=RESEND_AFTER.total_seconds() + 30)
    error = _drain(topic, "error", want=1)
    assert sorted(n["event_type"] for n in info) == [
        "backup.create.end", "backup.create.start", "backup.create.start", "plan.create.end"]
    assert [n["event_type"] for n in error] == ["backup.create.error"]
    for notification in info + error:
        assert notification["publisher_id"] == f"cairn.{socket.gethostname()}"
        assert notification["payload"]["tenant_id"] == project["X-Project-Id"]
    [end] = [n for n in info if n["event_type"] == "backup.create.end"]
    assert end["priority"] == "INFO"
    assert end["payload"]["backup_id"] == ok["restore_point_id"]
    assert end["payload"]["volume_id"] == f"ceph-a/volumes/{good}"
    assert end["payload"]["status"] == "succeeded"
    assert end["payload"]["fail_reason"] is None
    assert error[0]["priority"] == "ERROR"
    assert error[0]["payload"]["fail_reason"] == failed["error"]["message"]
    assert error[0]["payload"]["status"] == "failed"
