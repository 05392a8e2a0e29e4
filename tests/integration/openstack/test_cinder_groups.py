"""Plans of Cinder generic volume groups, on real Keystone, Cinder and Ceph: a tenant names
the group instead of its volumes; the plan backs the group's volumes up at one instant and
follows the group as volumes join and leave it in Cinder; what cannot be followed is
refused with a reason; a volume given to another project leaves the plan's group
snapshots and the plan."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import rbd

from services.errors import VolumeNotFound
from tests.support import ceph
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    User,
    change_group,
    cinder_group,
    cinder_volume,
    delete_volume,
    image_of,
    transfer,
)

T = TypeVar("T")

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


def _wait(what: str, check: Callable[[], T | None], timeout: float = 60) -> T:
    deadline = time.monotonic() + timeout
    while (found := check()) is None:
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.2)
    return found


def _group_snapshots_on(volume_id: str) -> list[str]:
    with ceph.ioctx("ceph-a", "volumes") as io, \
            rbd.Image(io, image_of(volume_id), read_only=True) as image:
        return [s["group"]["snap_name"] for s in image.list_snaps() if "group" in s]


def _gone_from_cinder(owner: User, volume_id: str) -> bool | None:
    """True once Cinder no longer has the volume; None while it is being deleted."""
    try:
        status = owner.cinder().get(volume_id).status
    except VolumeNotFound:
        return True
    assert not status.startswith("error"), f"Cinder could not delete {volume_id}: {status}"
    return None


def test_a_group_plans_volume_given_to_another_project_leaves_the_run(
        cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    """Project A's group plan over two volumes; one is transferred to project B. A's next
    run neither quiesces nor snapshots B's volume nor holds it in A's RBD group, while the
    rest of the run is being copied, and B can delete it in Cinder meanwhile. Before, the
    run's group snapshot took it along (only its own job failed, volume_not_owned): it sat
    in A's RBD group with a member of A's snapshot until the run's last copy ended, and
    B's delete failed."""
    giver, taker = cloud["a-member"], cloud["b-member"]
    token = giver.token()
    given = giver.cinder().create(size_gb=1, name=ceph.unique_name("given"), volume_type=None,
                                  description="test", metadata={}).id
    owner = giver
    with contextlib.ExitStack() as made:
        made.callback(lambda: delete_volume(owner, given))
        giver.cinder().wait_for(given, "available", 120)
        kept = made.enter_context(cinder_volume(giver, ceph.unique_name("kept")))
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(kept)) as image:
            ceph.write_mixed(image, size=image.size(), seed=61)  # ~13 MiB: 13 s at 1 MiB/s
        created = os_cairn.call("POST", "/v1/plans", token, json={
            "name": ceph.unique_name("app"), "volumes": [kept, given], "rules": RULES,
            "consistency": "group", "qos_bytes_per_second": ceph.MiB})
        assert created.status_code == 201, created.text
        plan_id = created.json()["id"]
        made.callback(os_cairn.call, "DELETE", f"/v1/plans/{plan_id}", token)

        transfer(given, giver, taker)
        owner = taker
        run = os_cairn.call("POST", f"/v1/plans/{plan_id}/run", token, json={"kind": "full"})
        assert run.status_code == 202, run.text
        jobs = {j["volume"].rsplit("/", 1)[1]: j for j in run.json()["jobs"]}
        copying = jobs[image_of(kept)]
        # Cancelled at the end, and waited for: its undo releases the group snapshot,
        # without which Cinder could not delete the volume.
        made.callback(os_cairn.wait_job, copying["id"], token)
        made.callback(os_cairn.call, "POST", f"/v1/jobs/{copying['id']}/cancel", token)
        refused = os_cairn.wait_job(jobs[image_of(given)]["id"], token)
        assert refused["error"]["code"] == "volume_not_owned", refused

        point_id = _wait("the copy's start", lambda: os_cairn.call(
            "GET", f"/v1/jobs/{copying['id']}", token).json()["restore_point_id"])
        point = os_cairn.call("GET", f"/v1/restore-points/{point_id}", token).json()
        _wait("the run's group snapshot", lambda: os_cairn.call(
            "GET", f"/v1/restore-point-groups/{point['group_id']}", token).json()["taken_at"])
        with ceph.ioctx("ceph-a", "volumes") as io:
            in_group = {i["name"] for i in rbd.Group(io, f"cairn.plan.{plan_id}").list_images()}
        assert in_group == {image_of(kept)}
        assert _group_snapshots_on(given) == []
        assert _group_snapshots_on(kept) == [f"cairn.{point['group_id']}"]

        # B deletes its volume in Cinder while A's run is still copying the other one.
        taker.cinder().delete(given)
        assert _wait("B's delete", lambda: _gone_from_cinder(taker, given))
        still = os_cairn.call("GET", f"/v1/jobs/{copying['id']}", token).json()
        assert still["status"] == "running", "the run ended before B's delete was tried"
        assert _group_snapshots_on(kept) == [f"cairn.{point['group_id']}"]


def test_a_plan_of_a_cinder_group_drops_a_member_given_to_another_project(
        cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    """Cinder keeps a transferred volume in its old project's group. The scheduler's sync
    asks about every member at every sync (before, only new ones: a member it knew stayed
    in A's plan for good, and in every run's group snapshot)."""
    giver, taker = cloud["a-member"], cloud["b-member"]
    token = giver.token()
    with contextlib.ExitStack() as made:
        kept, given = (made.enter_context(cinder_volume(giver, ceph.unique_name("member")))
                       for _ in range(2))
        group = made.enter_context(cinder_group(giver, ceph.unique_name("app"), [kept, given]))
        created = os_cairn.call("POST", "/v1/plans", token, json={
            "name": ceph.unique_name("app"), "cinder_group": group, "rules": RULES})
        assert created.status_code == 201, created.text
        plan_id = created.json()["id"]
        made.callback(os_cairn.call, "DELETE", f"/v1/plans/{plan_id}", token)
        assert _plan_volumes(os_cairn, token, plan_id) == sorted([kept, given])

        transfer(given, giver, taker)
        made.callback(transfer, given, taker, giver)  # back, before the group is emptied
        _wait("the sync", lambda: _plan_volumes(os_cairn, token, plan_id) == [kept] or None,
              timeout=30)
