"""A Cinder volume transferred to another project is no longer backed up by the old
project's plan: ownership is checked again when each job starts (issue 12, item 6), beside
the source snapshot, which the refused job then removes again."""

from __future__ import annotations

import rbd

from services.records.restore_points import snapshot_name
from tests.support import ceph
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    delete_volume,
    image_of,
    transfer,
)


def test_a_transferred_volume_is_not_backed_up_by_its_old_project(
        cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    giver, taker = cloud["a-member"], cloud["b-member"]
    token = giver.token()
    volume = giver.cinder().create(size_gb=1, name=ceph.unique_name("handover"),
                                   volume_type=None, description="test", metadata={})
    owner = giver
    try:
        giver.cinder().wait_for(volume.id, "available", 120)
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume.id)) as image:
            image.write(ceph._Random(81).bytes(1 << 20), 0)
        plan = os_cairn.call("POST", "/v1/plans", token, json={
            "name": ceph.unique_name("handover"), "volumes": [volume.id],
            "rules": [{"cron": "0 2 * * *"}]})
        assert plan.status_code == 201, plan.text
        plan_id = plan.json()["id"]
        first = os_cairn.call("POST", f"/v1/plans/{plan_id}/run", token).json()["jobs"][0]
        first = os_cairn.wait_job(first["id"], token)
        assert first["status"] == "succeeded"

        transfer(volume.id, giver, taker)
        owner = taker
        after = os_cairn.call("POST", f"/v1/plans/{plan_id}/run", token).json()["jobs"][0]
        done = os_cairn.wait_job(after["id"], token)
        assert done["status"] == "failed", done
        assert done["error"]["code"] == "volume_not_owned"
        assert "now belongs to another project" in done["error"]["message"]
        rp = os_cairn.call("GET", f"/v1/restore-points/{done['restore_point_id']}",
                           token).json()
        assert rp["status"] == "error"
        # The snapshot taken while Cinder was asked is gone: nothing of the refused job
        # stays on the volume that is now another project's.
        with ceph.ioctx("ceph-a", "volumes") as io, \
                rbd.Image(io, image_of(volume.id), read_only=True) as image:
            names = {snap["name"] for snap in image.list_snaps()}
        assert snapshot_name(done["restore_point_id"]) not in names
        assert snapshot_name(first["restore_point_id"]) in names
        # The restore point made before the transfer stays the old project's.
        kept = os_cairn.call("GET", f"/v1/restore-points/{first['restore_point_id']}", token)
        assert kept.json()["status"] == "available"
        os_cairn.call("DELETE", f"/v1/plans/{plan_id}", token)
    finally:
        delete_volume(owner, volume.id)
