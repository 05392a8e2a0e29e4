"""Verify re-reads a restore point from the backup pool against its manifest: an intact one
is reported ok; after one object is overwritten with `rados put` it is reported corrupt,
with that object named, and a restore from it is refused."""

from __future__ import annotations

import subprocess

import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB, conf_path
from tests.support.flows import backup, restore_point
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph


def test_verify_finds_an_overwritten_object(stack: Stack, volumes_pool: rados.Ioctx,
                                            backups_pool: rados.Ioctx,
                                            tmp_path: object) -> None:
    source = ceph.unique_name("verify")
    ceph.make_mixed_image(volumes_pool, source, size=24 * MiB, seed=41)
    try:
        rp = restore_point(stack, backup(stack, source)["restore_point_id"])
        response = stack.post(f"/v1/restore-points/{rp['id']}/verify", {})
        assert response.status_code == 202, response.text
        job = stack.wait_job(response.json()["id"])
        assert job["kind"] == "verify"
        assert job["status"] == "succeeded", job
        verification = restore_point(stack, rp["id"])["verification"]
        assert verification["status"] == "ok"
        assert verification["corrupt_object_count"] == 0

        with rbd.Image(backups_pool, rp["backup_image"], read_only=True) as image:
            prefix = image.stat()["block_name_prefix"]
        damaged = f"{prefix}.{1:016x}"  # object 1 holds data in the mixed image
        junk = tmp_path / "junk"  # type: ignore[operator]
        junk.write_bytes(b"bit rot" * 1000)
        subprocess.run(["rados", "-c", str(conf_path("ceph-a")), "-p", "backups", "put",
                        damaged, str(junk)], check=True)

        job = stack.wait_job(stack.post(f"/v1/restore-points/{rp['id']}/verify", {})
                             .json()["id"])
        assert job["status"] == "failed"
        assert job["error"]["code"] == "data_corrupt"
        assert "1 object(s)" in job["error"]["message"]
        verification = restore_point(stack, rp["id"])["verification"]
        assert verification["status"] == "corrupt"
        assert verification["corrupt_objects"] == [1]

        refused = stack.post(f"/v1/restore-points/{rp['id']}/restore",
                             {"target": ceph.unique_name("from-corrupt")})
        assert refused.status_code == 409
        assert "failed verification" in refused.json()["error"]["message"]
    finally:
        ceph.remove_image(volumes_pool, source)
