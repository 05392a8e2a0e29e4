"""Plans of Cinder generic volume groups, on real Keystone, Cinder and Ceph: a tenant names
the group instead of its volumes; the plan backs the group's volumes up at one instant and
follows the group as volumes join and leave it in Cinder; what cannot be followed is
refused with a reason."""

from __future__ import annotations

import contextlib
import json
import time
import uuid

import rbd

from tests.support import ceph
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    change_group,
    cinder_group,
    cinder_volume,
    image_of,
)

RULES = [{"cron": "0 2 * * *", "kind": "incremental"}]


def _plan_volumes(os_cairn: OpenStackCairn, token: str, plan_id: str) -> list[str]:
    plan = os_cairn.call("GET", f"/v1/plans/{plan_id}", token)
    assert plan.status_code == 200, plan.text
    return sorted(plan.json()["volumes"])


def test_a_plan_of_a_cinder_group_follows_the_group(cloud: Cloud,
                                                    os_cairn: OpenStackCairn) -> None:
    member = cloud["a-member"]
    token = member.token()
    with contextlib.ExitStack() as made:
        v1, v2, v3 = (made.enter_context(cinder_volume(member, ceph.unique_name("grouped")))
                      for _ in range(3))
        for seed, volume_id in enumerate((v1, v2, v3)):
            with ceph.ioctx("ceph-a", "volumes") as io, \
                    rbd.Image(io, image_of(volume_id)) as image:
                ceph.write_mixed(image, size=8 << 20, seed=40 + seed)
        group = made.enter_context(cinder_group(member, ceph.unique_name("app"), [v1, v2]))
        created = os_cairn.call("POST", "/v1/plans", token, json={
            "name": ceph.unique_name("app"), "cinder_group": group.upper(), "rules": RULES})
        assert created.status_code == 201, created.text
        plan = created.json()
        made.callback(os_cairn.call, "DELETE", f"/v1/plans/{plan['id']}", token)
        assert sorted(plan["volumes"]) == sorted([v1, v2])
        assert (plan["cinder_group"], plan["consistency"]) == (group, "group")

        # The tenant changes the group in Cinder; a run now backs up the group as it is.
        assert change_group(member, group, add=[v3], remove=[v1]) == sorted([v2, v3])
        run = os_cairn.call("POST", f"/v1/plans/{plan['id']}/run", token, json={"kind": "full"})
        assert run.status_code == 202, run.text
        jobs = [os_cairn.wait_job(j["id"], token) for j in run.json()["jobs"]]
        assert sorted(j["volume"] for j in jobs) == sorted(
            f"ceph-a/volumes/{image_of(v)}" for v in (v2, v3)), jobs
        assert all(j["status"] == "succeeded" for j in jobs), jobs
        assert _plan_volumes(os_cairn, token, plan["id"]) == sorted([v2, v3])
        points = [os_cairn.call("GET", f"/v1/restore-points/{j['restore_point_id']}",
                                token).json() for j in jobs]
        groups = {p["group_id"] for p in points}
        assert len(groups) == 1, points
        assert None not in groups, points
        for point in points:  # each member is its volume (unchanged since), byte for byte
            with ceph.ioctx("ceph-a", "volumes") as io:
                assert ceph.sha256_of(io, point["volume"].split("/")[2]) == _backup_sha(point)

        # Without a run, the scheduler follows the group: v2 leaves, v1 comes back.
        change_group(member, group, add=[v1], remove=[v2])
        deadline = time.monotonic() + 30
        while _plan_volumes(os_cairn, token, plan["id"]) != sorted([v1, v3]):
            assert time.monotonic() < deadline, _plan_volumes(os_cairn, token, plan["id"])
            time.sleep(0.5)

        # Listing volumes by hand would fight the group: refused until the plan stops
        # following it, which keeps the volumes it has.
        listed = os_cairn.call("PATCH", f"/v1/plans/{plan['id']}", token, json={"volumes": [v2]})
        assert listed.status_code == 422, listed.text
        assert f"follows Cinder group {group}" in listed.json()["error"]["message"]
        stopped = os_cairn.call("PATCH", f"/v1/plans/{plan['id']}", token,
                                json={"cinder_group": None})
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["cinder_group"] is None
        assert sorted(stopped.json()["volumes"]) == sorted([v1, v3])
        change_group(member, group, remove=[v3])
        time.sleep(2.5)  # two syncs: an unfollowed plan keeps its volumes
        assert _plan_volumes(os_cairn, token, plan["id"]) == sorted([v1, v3])
        again = os_cairn.call("PATCH", f"/v1/plans/{plan['id']}", token, json={"volumes": [v2]})
        assert again.status_code == 200, again.text
        assert again.json()["volumes"] == [v2]


def _backup_sha(point: dict[str, str]) -> str:
    """sha256 of the restore point's data on the backup image (the local target)."""
    with ceph.ioctx("ceph-a", "backups") as io:
        return ceph.sha256_of(io, point["backup_image"], snapshot=point["backup_snapshot"])


def test_what_a_group_plan_cannot_follow_is_refused(cloud: Cloud,
                                                    os_cairn: OpenStackCairn) -> None:
    member, other = cloud["a-member"], cloud["b-member"]
    token = member.token()

    def create(body: dict[str, object]) -> tuple[int, str]:
        answer = os_cairn.call("POST", "/v1/plans", token, json={
            "name": ceph.unique_name("refused"), "rules": RULES, **body})
        return answer.status_code, answer.text

    with contextlib.ExitStack() as made:
        mine = made.enter_context(cinder_volume(member, ceph.unique_name("mine")))
        theirs = made.enter_context(cinder_volume(other, ceph.unique_name("theirs")))
        b_group = made.enter_context(cinder_group(other, ceph.unique_name("b"), [theirs]))
        empty = made.enter_context(cinder_group(member, ceph.unique_name("empty"), []))
        a_group = made.enter_context(cinder_group(member, ceph.unique_name("a"), [mine]))

        status, text = create({"cinder_group": b_group})  # another project's group
        assert (status, "not found (or not yours)" in text) == (422, True), text
        status, text = create({"cinder_group": str(uuid.uuid4())})
        assert (status, "not found" in text) == (422, True), text
        status, text = create({"cinder_group": empty})
        assert (status, "has no volumes" in text) == (422, True), text
        status, text = create({"cinder_group": a_group, "volumes": [mine]})
        assert (status, "not both" in text) == (422, True), text

        # A volume is in one group plan at most (one RBD group per image).
        status, text = create({"volumes": [mine], "consistency": "group"})
        assert status == 201, text
        made.callback(os_cairn.call, "DELETE", f"/v1/plans/{json.loads(text)['id']}", token)
        status, text = create({"cinder_group": a_group})
        assert (status, "already in group plan" in text) == (409, True), text
        # Backing the group up volume by volume is another matter: allowed.
        status, text = create({"cinder_group": a_group, "consistency": "volume"})
        assert status == 201, text
        made.callback(os_cairn.call, "DELETE", f"/v1/plans/{json.loads(text)['id']}", token)
