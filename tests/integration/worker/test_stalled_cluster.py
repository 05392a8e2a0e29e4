"""A Ceph cluster that stops answering (`ceph osd pause`) costs the API and the workers a
bounded time: the API answers 503 with Retry-After, a job fails with a reason a tenant can
read (no librbd or errno text). A client the cluster blocklisted connects anew."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import rados
import rbd
from fastapi.testclient import TestClient

from api.main import create_app
from services.errors import StorageUnavailable
from services.storage.ceph import CephClusters
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup, start_backup
from tests.support.stack import BIN, HEADERS, Process, Stack

pytestmark = pytest.mark.ceph

OP_TIMEOUT = 4


def mon_command(cluster: str, **command: str) -> None:
    handle = ceph.connect(cluster)
    try:
        ret, _out, err = handle.mon_command(json.dumps(command), b"")
        assert ret == 0, err
    finally:
        handle.shutdown()


@contextmanager
def paused(cluster: str) -> Iterator[None]:
    mon_command(cluster, prefix="osd pause")
    try:
        yield
    finally:
        mon_command(cluster, prefix="osd unpause")


@contextmanager
def impatient_worker(stack: Stack) -> Iterator[Process]:
    """The stack's worker replaced by one whose Ceph operations time out after OP_TIMEOUT."""
    stack.worker.stop()
    env = {**stack.env, "CAIRN_CEPH_OP_TIMEOUT_SECONDS": str(OP_TIMEOUT)}
    worker = Process("cairn-worker", [str(BIN / "cairn-worker")], env,
                     stack.log_dir / "worker-impatient.log")
    worker.start("ready")
    try:
        yield worker
    finally:
        worker.stop()
        stack.worker.start("ready")


@pytest.fixture
def volume(volumes_pool: rados.Ioctx) -> Iterator[str]:
    with ceph.dense_image(volumes_pool, "stall", 12 * MiB, seed=21) as name:
        yield name


# It pauses ceph-b, which every other test uses: alone, after the parallel phase.
@pytest.mark.serial
def test_a_paused_cluster_gives_503_and_failed_jobs_with_a_reason(
        stack: Stack, volume: str) -> None:
    rp = backup(stack, volume, target="offsite")["restore_point_id"]
    settings = stack.settings.model_copy(update={"ceph_op_timeout_seconds": OP_TIMEOUT})
    with TestClient(create_app(settings)) as api, impatient_worker(stack), paused("ceph-b"):
        # The API must look at ceph-b (does the restore's target image exist?).
        started = time.monotonic()
        response = api.post(f"/v1/restore-points/{rp}/restore",
                            json={"target": f"ceph-b/volumes/{ceph.unique_name('never')}"},
                            headers=HEADERS)
        took = time.monotonic() - started
        assert response.status_code == 503, response.text
        assert response.headers["Retry-After"].isdigit()
        assert took < OP_TIMEOUT * 3, took
        # A backup to the paused cluster fails with a reason, in bounded time.
        job = start_backup(stack, volume, target="offsite", kind="full")
        done = stack.wait_job(job["id"], timeout=OP_TIMEOUT * 10)
    assert done["status"] == "failed", done
    assert done["error"]["code"] in ("storage_timeout", "storage_unavailable"), done["error"]
    message = done["error"]["message"]
    for raw in ("errno", "Errno", "rbd.", "rados.", "Timeout", "[", "ceph.conf"):
        assert raw not in message, message
    # Nothing of the failed backup is left as a restore point that could lie.
    assert stack.get(f"/v1/restore-points/{done['restore_point_id']}").json()["status"] \
        != "available"


def test_a_blocklisted_client_connects_anew(stack: Stack, volumes_pool: rados.Ioctx) -> None:
    name = ceph.unique_name("blocklisted")
    rbd.RBD().create(volumes_pool, name, MiB)
    clusters = CephClusters(stack.settings)
    try:
        with clusters.ioctx("ceph-a", "volumes") as io:
            assert name in rbd.RBD().list(io)
        handle = clusters.handle("ceph-a")
        # As when another client breaks this one's exclusive lock on an image.
        mon_command("ceph-a", prefix="osd blocklist", blocklistop="add",
                    addr=handle.get_addrs())
        with pytest.raises((rados.Error, rbd.Error, StorageUnavailable)), \
                clusters.ioctx("ceph-a", "volumes") as io:
            rbd.Image(io, name).close()
        # The next use is a new connection, and works.
        with clusters.ioctx("ceph-a", "volumes") as io:
            assert name in rbd.RBD().list(io)
        assert clusters.handle("ceph-a") is not handle
    finally:
        clusters.close()
        ceph.remove_image(volumes_pool, name)
