"""What a user does through the API, as steps the tests share: back up, restore, wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Process, Stack


def start_backup(stack: Stack, volume: str, **extra: object) -> dict[str, Any]:
    """`volume` is `image` (in ceph-a/volumes) or a full cluster/pool/image."""
    ref = volume if volume.count("/") == 2 else f"ceph-a/volumes/{volume}"
    response = stack.post("/v1/backups", {"volume": ref, **extra})
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    return job


def backup(stack: Stack, volume: str, **extra: object) -> dict[str, Any]:
    """Back up and wait; returns the finished job (asserted succeeded)."""
    job = stack.wait_job(start_backup(stack, volume, **extra)["id"])
    assert job["status"] == "succeeded", job
    return job


def restore_point(stack: Stack, rp_id: str) -> dict[str, Any]:
    response = stack.get(f"/v1/restore-points/{rp_id}")
    assert response.status_code == 200, response.text
    rp: dict[str, Any] = response.json()
    return rp


def start_restore(stack: Stack, rp_id: str, target: str, **extra: object) -> dict[str, Any]:
    response = stack.post(f"/v1/restore-points/{rp_id}/restore", {"target": target, **extra})
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    return job


def restore(stack: Stack, rp_id: str, target: str, **extra: object) -> dict[str, Any]:
    job = stack.wait_job(start_restore(stack, rp_id, target, **extra)["id"])
    assert job["status"] == "succeeded", job
    return job


def wait_for_progress(stack: Stack, job_id: str, at_least: int,
                      timeout: float = 30) -> dict[str, Any]:
    """Wait until a running job has copied `at_least` bytes (and not finished)."""
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = stack.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "running" and job["progress"]["bytes_done"] >= at_least:
            return job
        assert job["status"] in ("queued", "running"), job
        time.sleep(0.05)
    raise AssertionError(f"job never copied {at_least} bytes: {job}")


def start_failing_backup(post: Callable[[str, Any], Any], worker: Process,
                         io: rados.Ioctx) -> str:
    """A backup that fails in the worker (its volume is gone when the worker starts it):
    the worker is stopped between the API's check of the volume and its removal, then
    started again. (Not SIGSTOP: a worker frozen inside a SQLite transaction would hold the
    database's lock.) `post(path, body)` is the caller's way to the API. Returns the job's
    id."""
    gone = ceph.unique_name("gone")
    rbd.RBD().create(io, gone, 4 * MiB)
    worker.stop()
    try:
        answer = post("/v1/backups", {"volume": f"ceph-a/volumes/{gone}"})
        assert answer.status_code == 202, answer.text
        rbd.RBD().remove(io, gone)
    finally:
        worker.start("ready")
    job_id: str = answer.json()["id"]
    return job_id
