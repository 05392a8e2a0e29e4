"""Instant restore into a new Cinder volume on real Keystone, Cinder and Ceph: Cinder adopts
a clone of the backup snapshot in the member's project, the volume is `available` with the
restore point's bytes before the flatten ends, the member's writes never reach the backup,
and the restore point refuses deletion until the flatten is done."""

from __future__ import annotations

import time
from typing import Any

import rbd

from services.errors import VolumeNotFound
from tests.support import ceph
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    User,
    cinder_volume,
    delete_volume,
    image_of,
    private_volume_type,
)


def _wait_ready(os_cairn: OpenStackCairn, token: str, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        job: dict[str, Any] = os_cairn.call("GET", f"/v1/jobs/{job_id}", token).json()
        if job["timings"]["ready_at"] is not None:
            return job
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, f"never ready: {job}"
        time.sleep(0.1)


def _job_ids(os_cairn: OpenStackCairn, token: str) -> set[str]:
    return {j["id"] for j in os_cairn.call("GET", "/v1/jobs", token,
                                           params={"limit": 1000}).json()["jobs"]}


def test_instant_restore_into_a_new_cinder_volume(cloud: Cloud,
                                                  os_cairn: OpenStackCairn) -> None:
    member = cloud["a-member"]
    token = member.token()
    with cinder_volume(member, ceph.unique_name("instant-src")) as source:
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(source)) as image:
            ceph.write_mixed(image, size=image.size(), seed=71)
        made = os_cairn.call("POST", "/v1/backups", token, json={"volume": source})
        assert made.status_code == 202, made.text
        backed_up = os_cairn.wait_job(made.json()["id"], token)
        assert backed_up["status"] == "succeeded", backed_up
        rp = os_cairn.call("GET", f"/v1/restore-points/{backed_up['restore_point_id']}",
                           token).json()
        with ceph.ioctx("ceph-a", "backups") as io:
            expected = ceph.sha256_of(io, rp["backup_image"], rp["backup_snapshot"])

        asked = time.monotonic()
        response = os_cairn.call(
            "POST", f"/v1/restore-points/{rp['id']}/restore", token,
            json={"new_volume": {"name": "instantly-back"}, "mode": "instant",
                  "qos_bytes_per_second": 1 * ceph.MiB})
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        new_id = None
        try:
            ready = _wait_ready(os_cairn, token, job_id)
            usable_after = time.monotonic() - asked
            new_id = ready["restore_volume_id"]
            assert new_id
            assert ready["status"] == "running", "the flatten ended before it was checked"
            volume = member.cinder().get(new_id)  # the member's own project has it
            assert volume.status == "available"
            assert volume.name == "instantly-back"
            assert usable_after < 30, usable_after
            refused = os_cairn.call("DELETE", f"/v1/restore-points/{rp['id']}", token)
            assert refused.status_code == 409, refused.text
            assert "flatten" in refused.json()["error"]["message"]
            with ceph.ioctx("ceph-a", "volumes") as io:
                assert ceph.sha256_of(io, image_of(new_id)) == expected
                with rbd.Image(io, image_of(new_id)) as image:
                    image.write(b"written by the tenant" * 5000, 1 * ceph.MiB)
                written = ceph.sha256_of(io, image_of(new_id))
            with ceph.ioctx("ceph-a", "backups") as io:
                assert ceph.sha256_of(io, rp["backup_image"], rp["backup_snapshot"]) == expected

            done = os_cairn.wait_job(job_id, token)
            assert done["status"] == "succeeded", done
            assert done["timings"]["ready_at"] < done["timings"]["finished_at"]
            with ceph.ioctx("ceph-a", "volumes") as io:
                assert ceph.sha256_of(io, image_of(new_id)) == written
                with rbd.Image(io, image_of(new_id), read_only=True) as image:
                    try:
                        image.parent_info()
                        raise AssertionError("still a clone after the flatten")
                    except rbd.ImageNotFound:
                        pass
            deleted = os_cairn.call("DELETE", f"/v1/restore-points/{rp['id']}", token)
            assert deleted.status_code == 202, deleted.text
            assert os_cairn.wait_job(deleted.json()["id"], token)["status"] == "succeeded"
        finally:
            if new_id is not None:
                os_cairn.wait_job(job_id, token)
                delete_volume(member, new_id)


def test_project_b_cannot_restore_a_instantly(cloud: Cloud, os_cairn: OpenStackCairn,
                                              protected: Any) -> None:
    answer = os_cairn.call(
        "POST", f"/v1/restore-points/{protected.restore_point_id}/restore",
        cloud["b-member"].token(),
        json={"new_volume": {"name": "stolen"}, "mode": "instant"})
    assert answer.status_code == 404, answer.text


def test_a_restore_gets_only_a_volume_type_its_project_may_use(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Any) -> None:
    """Cinder adopts an instant restore's clone for Cairn's service user, whom Cinder lets
    use every volume type: the type is checked with the tenant's own token when the restore
    is asked for, and a private type of other projects is refused then, like a missing one
    (before, B's member got A's private type, and the job was made)."""
    member_a, member_b = cloud["a-member"], cloud["b-member"]
    with private_volume_type(ceph.unique_name("private-type"), member_a) as private:
        token_b = member_b.token()
        with cinder_volume(member_b, ceph.unique_name("b-source")) as source:
            made = os_cairn.call("POST", "/v1/backups", token_b, json={"volume": source})
            assert made.status_code == 202, made.text
            backed_up = os_cairn.wait_job(made.json()["id"], token_b)
            assert backed_up["status"] == "succeeded", backed_up
            rp_b = backed_up["restore_point_id"]
            jobs = _job_ids(os_cairn, token_b)
            volumes = {v.id for v in member_b.cinder().list_volumes()}
            missing = ceph.unique_name("no-such-type")
            for mode in ("instant", "copy"):
                for kind in (private.name, private.id, missing):
                    refused = os_cairn.call(
                        "POST", f"/v1/restore-points/{rp_b}/restore", token_b,
                        json={"new_volume": {"name": "typed", "volume_type": kind},
                              "mode": mode})
                    assert refused.status_code == 422, (mode, kind, refused.text)
                    message = refused.json()["error"]["message"]
                    assert message == (f"new_volume.volume_type {kind!r}: no such volume type "
                                       "is available to your project (openstack volume type "
                                       "list shows the ones that are)"), message
            # Nothing was queued, and no volume made in B's project.
            assert _job_ids(os_cairn, token_b) == jobs
            assert {v.id for v in member_b.cinder().list_volumes()} == volumes
            deleted = os_cairn.call("DELETE", f"/v1/restore-points/{rp_b}", token_b)
            assert os_cairn.wait_job(deleted.json()["id"], token_b)["status"] == "succeeded"

        # Project A was given the type: its instant restore gets it.
        token_a = member_a.token()
        response = os_cairn.call(
            "POST", f"/v1/restore-points/{protected.restore_point_id}/restore", token_a,
            json={"new_volume": {"name": "typed", "volume_type": private.name},
                  "mode": "instant"})
        assert response.status_code == 202, response.text
        done = os_cairn.wait_job(response.json()["id"], token_a)
        try:
            assert done["status"] == "succeeded", done
            assert member_a.cinder().get(done["restore_volume_id"]).volume_type == private.name
        finally:
            if done["restore_volume_id"]:
                _delete_and_wait(member_a, done["restore_volume_id"])


def _delete_and_wait(user: User, volume_id: str) -> None:
    """Delete a volume and wait until Cinder has (its type can be deleted only then)."""
    delete_volume(user, volume_id)
    deadline = time.monotonic() + 60
    while True:
        try:
            user.cinder().get(volume_id)
        except VolumeNotFound:
            return
        assert time.monotonic() < deadline, f"Cinder volume {volume_id} is still there"
        time.sleep(0.5)
