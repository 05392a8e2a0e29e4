"""A Cairn with auth_strategy keystone on the local stack's real Keystone, Cinder and Ceph,
and a Cinder volume of project A that a plan has backed up once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import rbd

from tests.support import ceph
from tests.support.databases import migrated_database
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    admin_cinder,
    cinder_volume,
    image_of,
    keystone_up,
    make_cloud,
    start_cairn,
)
from tests.support.workers import RedisDb, redis_db


@pytest.fixture(scope="session")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Cloud:
    if not keystone_up():
        pytest.exit("Keystone is not running: run `make test`, which starts Keystone and "
                    "Cinder (CAIRN_OPENSTACK=1)", returncode=3)
    return make_cloud(tmp_path_factory.mktemp("cloud"))


@pytest.fixture(scope="session")
def os_cairn(cloud: Cloud, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[OpenStackCairn]:
    directory = tmp_path_factory.mktemp("openstack-cairn")
    with migrated_database("postgresql", directory) as url:
        # Plans follow their Cinder groups within a second, not production's 5 minutes.
        cairn = start_cairn(url, redis_db(RedisDb.OPENSTACK), Path(directory) / "logs",
                            CAIRN_CINDER_GROUP_SYNC_SECONDS="1")
        yield cairn
        cairn.stop()


@dataclass(frozen=True)
class Protected:
    volume_id: str
    plan_id: str
    restore_point_id: str
    job_id: str
    snapshot_sha256: str
    """sha256 of the source snapshot the restore point was made from."""


@pytest.fixture(scope="session")
def protected(cloud: Cloud, os_cairn: OpenStackCairn) -> Iterator[Protected]:
    """A member of A made a Cinder volume through Cinder, wrote known data into it,
    protected it with a plan and ran the plan now."""
    member = cloud["a-member"]
    token = member.token()
    with cinder_volume(member, ceph.unique_name("protected")) as volume_id:
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as image:
            ceph.write_mixed(image, size=image.size(), seed=5)
        # A boot disk: a restore into Cinder must give back a volume Nova can boot from.
        admin_cinder().action(volume_id, {"os-set_bootable": {"bootable": True}})
        created = os_cairn.call("POST", "/v1/plans", token, json={
            "name": ceph.unique_name("nightly"), "volumes": [volume_id],
            "rules": [{"cron": "0 2 * * *", "kind": "incremental"}],
            "retention": {"keep_last": 5}})
        assert created.status_code == 201, created.text
        plan_id = created.json()["id"]
        run = os_cairn.call("POST", f"/v1/plans/{plan_id}/run", token, json={"kind": "full"})
        assert run.status_code == 202, run.text
        job = os_cairn.wait_job(run.json()["jobs"][0]["id"], token)
        assert job["status"] == "succeeded", job
        rp = os_cairn.call("GET", f"/v1/restore-points/{job['restore_point_id']}", token).json()
        with ceph.ioctx("ceph-a", "volumes") as io:
            digest = ceph.sha256_of(io, image_of(volume_id), snapshot=rp["source_snapshot"])
        yield Protected(volume_id, plan_id, rp["id"], job["id"], digest)
        os_cairn.call("DELETE", f"/v1/plans/{plan_id}", token)
