"""Events never wait behind jobs: a worker's senders take due deliveries from the outbox
themselves, so with every job slot of the worker held by a running backup, another
project's event still reaches its receiver within 5 s."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack
from tests.support.webhook_receiver import Receiver

pytestmark = [pytest.mark.ceph, pytest.mark.production_database_only]

VOLUME = 24 * MiB
"""At the slowest QoS a caller may set (1 MiB/s) a backup of it runs 24 s: past any wait
here, so the slots stay held until the test cancels the backups."""


def _job(stack: Stack, headers: dict[str, str], job_id: str) -> dict[str, Any]:
    found: dict[str, Any] = stack.get(f"/v1/jobs/{job_id}", headers).json()
    return found


def test_an_event_goes_out_while_every_job_slot_runs_a_backup(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    slots = stack.settings.worker_concurrency
    per_project = stack.settings.max_jobs_per_project
    tenants = [{"X-Project-Id": f"busy-{uuid.uuid4().hex[:8]}", "X-Roles": "member"}
               for _ in range(-(-slots // per_project))]
    jobs: list[tuple[dict[str, str], str]] = []
    receiver = Receiver()
    listener = {"X-Project-Id": f"listening-{uuid.uuid4().hex[:8]}", "X-Roles": "member"}
    hook: str | None = None
    try:
        for number in range(slots):
            name = ceph.random_image(volumes_pool, "slot", VOLUME, seed=40 + number)
            images.append(name)
            headers = tenants[number // per_project]
            answer = stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}",
                                                "qos_bytes_per_second": MiB}, headers)
            assert answer.status_code == 202, answer.text
            jobs.append((headers, answer.json()["id"]))
        deadline = time.monotonic() + 60
        while any(_job(stack, h, j)["status"] != "running" for h, j in jobs):
            assert time.monotonic() < deadline, stack.busy_with()
            time.sleep(0.1)

        made = stack.post("/v1/webhooks", {"url": receiver.url}, listener)
        assert made.status_code == 201, made.text
        hook = made.json()["id"]
        sent = stack.post(f"/v1/webhooks/{hook}/test", {}, listener)
        assert sent.status_code == 202, sent.text
        asked = time.monotonic()
        got = receiver.wait_for(1, timeout=5)
        took = time.monotonic() - asked
        assert got, f"no event within 5 s while {slots} backups held every job slot"
        assert got[0].headers["webhook-id"] == sent.json()["id"]
        assert took < 5, f"the event took {took:.1f} s behind {slots} running backups"
        # The slots were held all along: every backup still runs.
        assert all(_job(stack, h, j)["status"] == "running" for h, j in jobs), \
            [_job(stack, h, j)["status"] for h, j in jobs]
    finally:
        receiver.close()
        for headers, job_id in jobs:
            stack.post(f"/v1/jobs/{job_id}/cancel", {}, headers)
        for headers, job_id in jobs:
            stack.wait_job(job_id, headers=headers, timeout=60)
        if hook is not None:
            stack.delete(f"/v1/webhooks/{hook}", listener)
