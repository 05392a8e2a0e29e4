"""What a project's storage figure says after deletes, cancels and races, on the real stack:
it equals what its restore points hold on their targets (docs/scheduling.md, Quotas),
measured here from the backup image itself (`rbd du`'s way: every object a snapshot holds
that the one before it does not, and whatever the image's head holds beyond its newest
snapshot) or from the manifests in the bucket.

The volumes are 16 MiB with 8 MiB of random data (objects 0 and 1 of 4 MiB), so a volume's
size is not a bound that hides a wrong figure."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = [pytest.mark.ceph, pytest.mark.both_databases]

GIB = 1 << 30
ADMIN = {"X-Project-Id": "cloud-admin", "X-Roles": "admin"}
SIZE, DATA = 16 * MiB, 8 * MiB


def member_of(project: str) -> dict[str, str]:
    return {"X-Project-Id": project, "X-Roles": "member"}


@pytest.fixture
def project(backups_pool: rados.Ioctx) -> Iterator[str]:
    name = ceph.unique_name("accounting")
    yield name
    ceph.remove_backups_of_project(backups_pool, name)


@pytest.fixture
def volume(volumes_pool: rados.Ioctx, images: list[str]) -> str:
    name = ceph.unique_name("accounting")
    rbd.RBD().create(volumes_pool, name, SIZE)
    images.append(name)
    write(volumes_pool, name, 0, DATA, seed=1)
    return name


def write(pool: rados.Ioctx, image: str, offset: int, length: int, *, seed: int) -> None:
    with rbd.Image(pool, image) as opened:
        opened.write(ceph._Random(seed).bytes(length), offset)


def set_quota(stack: Stack, project: str, *, mib: float | None) -> None:
    answer = stack.client.put(f"/v1/quotas/{project}", headers=ADMIN, json={
        "gigabytes": None if mib is None else mib * MiB / GIB, "restore_points": None})
    assert answer.status_code == 200, answer.text


def stored(stack: Stack, project: str) -> int:
    return int(stack.get("/v1/usage", member_of(project)).json()["usage"]["bytes_stored"])


def backup(stack: Stack, project: str, image: str, kind: str, *, target: str = "local",
           wait: bool = True, **extra: object) -> dict[str, Any]:
    answer = stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{image}", "kind": kind,
                                        "target": target, **extra}, member_of(project))
    assert answer.status_code == 202, answer.text
    job: dict[str, Any] = answer.json()
    if wait:
        job = stack.wait_job(job["id"], headers=member_of(project))
        assert job["status"] == "succeeded", job
    return job


def delete(stack: Stack, project: str, rp_id: str) -> str:
    answer = stack.delete(f"/v1/restore-points/{rp_id}", member_of(project))
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def deleted(stack: Stack, project: str, rp_id: str) -> None:
    job = stack.wait_job(delete(stack, project, rp_id), headers=member_of(project))
    assert job["status"] == "succeeded", job


def backup_image_of(pool: rados.Ioctx, image: str) -> str | None:
    for name in rbd.RBD().list(pool):
        if not name.startswith("cairn.vol."):
            continue
        try:
            with rbd.Image(pool, name, read_only=True) as backup_image:
                if backup_image.metadata_get("cairn.volume") == f"ceph-a/volumes/{image}":
                    return str(name)
        except (rbd.ImageNotFound, KeyError):
            continue
    return None


def held_by_backup_image(pool: rados.Ioctx, image: str) -> int:
    """What the volume's backup image holds, object by object: each snapshot's objects that
    the snapshot before it does not hold, then the head's beyond the newest snapshot."""
    name = backup_image_of(pool, image)
    if name is None:
        return 0
    with rbd.Image(pool, name, read_only=True) as head:
        snaps = [s["name"] for s in sorted(head.list_snaps(), key=lambda s: s["id"])]
    total, since = 0, None
    for snap in [*snaps, None]:
        with rbd.Image(pool, name, snapshot=snap, read_only=True) as opened:
            found = [0]

            def count(_offset: int, length: int, exists: bool, found: list[int] = found) -> int:
                if exists:
                    found[0] += length
                return 0

            opened.diff_iterate(0, opened.size(), since, count, whole_object=True)
        total += found[0]
        since = snap
    return total


def test_weekly_fulls_count_what_the_backup_image_holds_after_retention(
        stack: Stack, project: str, volume: str, volumes_pool: rados.Ioctx,
        backups_pool: rados.Ioctx) -> None:
    # A full rewrites every object, so once the week before it is deleted, the backup
    # image holds the new full and nothing of the old chain.
    first = backup(stack, project, volume, "full")["restore_point_id"]
    write(volumes_pool, volume, 0, MiB, seed=2)
    daily = backup(stack, project, volume, "incremental")["restore_point_id"]
    backup(stack, project, volume, "full")
    assert stored(stack, project) == held_by_backup_image(backups_pool, volume) == 20 * MiB
    deleted(stack, project, first)
    # The daily still holds the old full's unchanged object.
    assert stored(stack, project) == held_by_backup_image(backups_pool, volume) == 16 * MiB
    deleted(stack, project, daily)
    assert stored(stack, project) == held_by_backup_image(backups_pool, volume) == DATA


@pytest.mark.parametrize("target", ["local", "s3"])
def test_deleting_the_newest_again_and_again_frees_what_it_added(
        stack: Stack, project: str, volume: str, volumes_pool: rados.Ioctx,
        backups_pool: rados.Ioctx, target: str) -> None:
    backup(stack, project, volume, "full", target=target)
    assert stored(stack, project) == DATA
    for round_ in range(3):
        write(volumes_pool, volume, 2 * 4 * MiB, 4 * MiB, seed=10 + round_)
        newest = backup(stack, project, volume, "incremental", target=target)
        assert stored(stack, project) > DATA
        deleted(stack, project, newest["restore_point_id"])
        assert stored(stack, project) == DATA, f"round {round_}"
        if target == "local":
            assert held_by_backup_image(backups_pool, volume) == DATA, f"round {round_}"


def test_the_next_backup_reserves_what_the_last_one_added_not_what_it_inherited(
        stack: Stack, project: str, volume: str, volumes_pool: rados.Ioctx) -> None:
    full = backup(stack, project, volume, "full")["restore_point_id"]
    write(volumes_pool, volume, 0, MiB, seed=3)
    backup(stack, project, volume, "incremental")  # rewrites object 0: adds 4 MiB
    deleted(stack, project, full)  # retention keeping the last one
    assert stored(stack, project) == DATA  # the incremental now holds the whole volume
    # The next incremental needs about what the last one added (4 MiB), not the 8 MiB
    # the last one holds since its full went.
    set_quota(stack, project, mib=13)
    write(volumes_pool, volume, 0, MiB, seed=4)
    job = backup(stack, project, volume, "incremental")
    assert stored(stack, project) == 12 * MiB, job


def test_a_cancelled_queued_copy_leaves_nothing_and_the_next_copy_works(
        stack: Stack, project: str, volume: str, volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    if "s3" not in stack.settings.object_targets:
        pytest.fail("the local RGW is not running: start the stack with CAIRN_RGW=1")
    source = backup(stack, project, volume, "full")["restore_point_id"]
    # Two slow backups hold the project's two slots, so the copy waits in the queue.
    busy = [ceph.random_image(volumes_pool, "accounting-busy", 8 * MiB, seed=20 + i)
            for i in range(2)]
    images.extend(busy)
    slow = [backup(stack, project, image, "full", wait=False, qos_bytes_per_second=2 * MiB)
            for image in busy]
    for job in slow:
        stack.wait_job(job["id"], statuses=("running",), headers=member_of(project))
    answer = stack.post(f"/v1/restore-points/{source}/copy", {"target": "s3"},
                        member_of(project))
    assert answer.status_code == 202, answer.text
    copy = answer.json()
    assert stack.get(f"/v1/jobs/{copy['id']}", member_of(project)).json()["status"] == "queued"
    cancelled = stack.post(f"/v1/jobs/{copy['id']}/cancel", {}, member_of(project))
    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    # Its restore point went with it: not `creating` for ever, not counted.
    assert stack.get(f"/v1/restore-points/{copy['restore_point_id']}",
                     member_of(project)).status_code == 404
    creating = [rp for rp in stack.get("/v1/restore-points", member_of(project),
                                       limit=100).json()["restore_points"]
                if rp["status"] == "creating"]
    assert [rp for rp in creating if rp["target"] == "s3"] == [], creating
    for job in slow:
        assert stack.wait_job(job["id"], headers=member_of(project))["status"] == "succeeded"
    assert stored(stack, project) == DATA + 16 * MiB
    # And a later copy of the same restore point to the same target is made.
    again = stack.post(f"/v1/restore-points/{source}/copy", {"target": "s3"},
                       member_of(project))
    assert again.status_code == 202, again.text
    job = stack.wait_job(again.json()["id"], headers=member_of(project))
    assert job["status"] == "succeeded", job
    assert stored(stack, project) == 2 * DATA + 16 * MiB


def test_deleting_most_of_a_chain_at_once_leaves_the_right_figure(
        stack: Stack, project: str, volume: str, volumes_pool: rados.Ioctx,
        backups_pool: rados.Ioctx) -> None:
    chain = [backup(stack, project, volume, "full")["restore_point_id"]]
    for day in range(4):
        write(volumes_pool, volume, (day % 2) * 4 * MiB, MiB, seed=30 + day)
        chain.append(backup(stack, project, volume, "incremental")["restore_point_id"])
    assert stored(stack, project) == held_by_backup_image(backups_pool, volume) == 24 * MiB
    # Four delete jobs of one chain at once (the worker runs them side by side).
    jobs = [delete(stack, project, rp_id) for rp_id in chain[:-1]]
    ends = [stack.wait_job(job_id, headers=member_of(project)) for job_id in jobs]
    assert [job["status"] for job in ends] == ["succeeded"] * 4, ends
    # The newest holds the whole volume now.
    assert stored(stack, project) == held_by_backup_image(backups_pool, volume) == DATA


def test_deleting_the_base_while_an_incremental_is_made_counts_what_it_holds(
        stack: Stack, project: str, volume: str, volumes_pool: rados.Ioctx,
        backups_pool: rados.Ioctx) -> None:
    base = backup(stack, project, volume, "full")["restore_point_id"]
    write(volumes_pool, volume, 2 * 4 * MiB, 8 * MiB, seed=40)
    running = backup(stack, project, volume, "incremental", wait=False,
                     qos_bytes_per_second=MiB)
    deadline = time.monotonic() + 60
    while True:  # copying (its plan is made), 8 MiB at 1 MiB/s
        job = stack.get(f"/v1/jobs/{running['id']}", member_of(project)).json()
        if job["status"] == "running" and (job["progress"]["bytes_total"] or 0) > 0:
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    deleted(stack, project, base)
    assert stack.get(f"/v1/jobs/{running['id']}", member_of(project)).json()["status"] == (
        "running")
    job = stack.wait_job(running["id"], headers=member_of(project))
    assert job["status"] == "succeeded", job
    # The incremental's snapshot holds the base's data and its own: the whole volume.
    assert stored(stack, project) == held_by_backup_image(backups_pool, volume) == SIZE


def test_backups_racing_for_the_room_of_three_leave_three(
        stack: Stack, project: str, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    # First backups (nothing tells their size up front) of four 4 MiB volumes, two at a
    # time (the project's slots): the one whose bytes cross 14 MiB stops, the others
    # fit and stay.
    sources = [ceph.random_image(volumes_pool, "accounting-race", 4 * MiB, seed=50 + i)
               for i in range(4)]
    images.extend(sources)
    set_quota(stack, project, mib=14)
    jobs = [backup(stack, project, image, "full", wait=False, qos_bytes_per_second=2 * MiB)
            for image in sources]
    ends = [stack.wait_job(job["id"], headers=member_of(project)) for job in jobs]
    assert sorted(job["status"] for job in ends) == ["failed", "succeeded", "succeeded",
                                                    "succeeded"], ends
    assert stored(stack, project) == 12 * MiB



def test_a_backup_the_quota_refuses_when_it_starts_is_told_like_any_failure(
        stack: Stack, project: str, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    # Three volumes queued while the quota has room; two start (the project's slots), the
    # quota is lowered, and the third is refused when it starts: its end is an event.
    sources = [ceph.random_image(volumes_pool, "accounting-told", 8 * MiB, seed=60 + i)
               for i in range(3)]
    images.extend(sources)
    hook = stack.post("/v1/webhooks", {"url": "http://127.0.0.1:9/never",
                                       "event_types": ["backup.create.error"]},
                      member_of(project))
    assert hook.status_code == 201, hook.text
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("told"), "volumes": [f"ceph-a/volumes/{v}" for v in sources],
        "rules": [{"cron": "0 3 * * *"}], "qos_bytes_per_second": 2 * MiB},
        member_of(project))
    assert plan.status_code == 201, plan.text
    answer = stack.client.put(f"/v1/quotas/{project}", headers=ADMIN,
                              json={"gigabytes": None, "restore_points": 3})
    assert answer.status_code == 200, answer.text
    run = stack.post(f"/v1/plans/{plan.json()['id']}/run", {"kind": "full"},
                     member_of(project))
    assert run.status_code == 202, run.text
    jobs = run.json()["jobs"]
    deadline = time.monotonic() + 30
    while True:
        states = [stack.get(f"/v1/jobs/{j['id']}", member_of(project)).json()["status"]
                  for j in jobs]
        if sorted(states) == ["queued", "running", "running"]:
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.05)
    waiting = jobs[states.index("queued")]["id"]
    answer = stack.client.put(f"/v1/quotas/{project}", headers=ADMIN,
                              json={"gigabytes": None, "restore_points": 2})
    assert answer.status_code == 200, answer.text
    refused = stack.wait_job(waiting, headers=member_of(project))
    assert (refused["status"], refused["error"]["code"]) == ("failed", "quota_exceeded"), refused
    deadline = time.monotonic() + 30
    while True:
        told = stack.get(f"/v1/webhooks/{hook.json()['id']}/deliveries",
                         member_of(project)).json()["deliveries"]
        if told:
            break
        assert time.monotonic() < deadline, "no event"
        time.sleep(0.1)
    assert [(d["event_type"], d["event"]["data"]["job_id"]) for d in told] == [
        ("backup.create.error", waiting)]
    for job in jobs:
        stack.wait_job(job["id"], headers=member_of(project))
