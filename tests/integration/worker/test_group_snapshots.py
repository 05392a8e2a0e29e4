"""Crash-consistent group backups on the real cluster: a plan with `consistency: group` over
three volumes (in two pools) takes one RBD group snapshot per run while a writer keeps
writing sequence numbers across the three; the group restore brings back three volumes of
one instant (none ahead of another), byte for byte; later runs copy only what changed, and
the group snapshot does not stay on the volumes."""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph

RULES = [{"cron": "0 2 * * *", "kind": "incremental"}]


class SequenceWriter:
    """Writes n into A, then B, then C, then n+1 into A...: at any instant, and so in any
    crash-consistent copy, A's number >= B's >= C's >= A's - 1."""

    def __init__(self, images: list[rbd.Image]) -> None:
        self.images = images
        self.stop = threading.Event()
        self.written = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            for image in self.images:
                image.write(struct.pack("<Q", n) * 512, 0)
            self.written = n

    def __enter__(self) -> SequenceWriter:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(30)


def _sequence(io: rados.Ioctx, name: str) -> int:
    with rbd.Image(io, name, read_only=True) as image:
        return int(struct.unpack("<Q", image.read(0, 8))[0])


@pytest.fixture
def three_volumes(volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx
                  ) -> Iterator[list[tuple[rados.Ioctx, str, str]]]:
    """(ioctx, image, ref): two in `volumes`, one in `backups` (a group spans pools)."""
    made = []
    for io, pool, size, seed in ((volumes_pool, "volumes", 24 * MiB + 513, 91),
                                 (volumes_pool, "volumes", 16 * MiB, 92),
                                 (backups_pool, "backups", 12 * MiB + 4096, 93)):
        name = ceph.unique_name("grp")
        ceph.make_mixed_image(io, name, size=size, seed=seed)
        made.append((io, name, f"ceph-a/{pool}/{name}"))
    yield made
    for io, name, _ref in made:
        ceph.remove_image(io, name)


def _run_plan(stack: Stack, plan_id: str, kind: str) -> list[dict[str, Any]]:
    run = stack.post(f"/v1/plans/{plan_id}/run", {"kind": kind})
    assert run.status_code == 202, run.text
    jobs = [stack.wait_job(j["id"], timeout=180) for j in run.json()["jobs"]]
    assert [j["status"] for j in jobs] == ["succeeded"] * len(jobs), jobs
    return jobs


def _group_of(stack: Stack, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    rps = [stack.get(f"/v1/restore-points/{j['restore_point_id']}").json() for j in jobs]
    assert len({rp["group_id"] for rp in rps}) == 1, rps
    group = stack.get(f"/v1/restore-point-groups/{rps[0]['group_id']}")
    assert group.status_code == 200, group.text
    body: dict[str, Any] = group.json()
    return body


def _restore_group(stack: Stack, group_id: str, prefix: str) -> None:
    answer = stack.post(f"/v1/restore-point-groups/{group_id}/restore",
                        {"target_prefix": f"ceph-a/volumes/{prefix}"})
    assert answer.status_code == 202, answer.text
    for job in answer.json()["jobs"]:
        assert stack.wait_job(job["id"])["status"] == "succeeded"


def _group_snapshots_left(io: rados.Ioctx, name: str) -> int:
    with rbd.Image(io, name, read_only=True) as image:
        return sum(1 for s in image.list_snaps() if "group" in s)


def test_a_group_run_holds_its_volumes_at_one_instant(
        stack: Stack, volumes_pool: rados.Ioctx,
        three_volumes: list[tuple[rados.Ioctx, str, str]]) -> None:
    created = stack.post("/v1/plans", {
        "name": ceph.unique_name("app"), "volumes": [ref for _, _, ref in three_volumes],
        "rules": RULES, "consistency": "group"})
    assert created.status_code == 201, created.text
    plan = created.json()
    assert plan["consistency"] == "group"
    restored: list[str] = []
    try:
        handles = [rbd.Image(io, name) for io, name, _ in three_volumes]
        try:
            with SequenceWriter(handles) as writer:
                while writer.written < 20:
                    pass
                first = _run_plan(stack, plan["id"], "full")
                second = _run_plan(stack, plan["id"], "incremental")
                assert writer.written > 20
        finally:
            for handle in handles:
                handle.close()

        for number, jobs in enumerate((first, second)):
            group = _group_of(stack, jobs)
            assert group["complete"] is True
            assert group["taken_at"] is not None
            assert len(group["restore_points"]) == 3
            prefix = ceph.unique_name(f"grp-back{number}") + "-"
            _restore_group(stack, group["id"], prefix)
            names = [prefix + name for _, name, _ in three_volumes]
            restored += names
            a, b, c = (_sequence(volumes_pool, n) for n in names)
            assert a >= b >= c >= a - 1, (a, b, c)  # one instant: none ahead of another
            assert a > 0

        # The incremental run read everything but wrote only what changed: the sequence
        # numbers' first object, and nothing of the rest.
        for job in second:
            rp = stack.get(f"/v1/restore-points/{job['restore_point_id']}").json()
            assert rp["kind"] == "incremental", rp
            assert rp["bytes_copied"] <= 4 * MiB, rp
        # The group snapshot went once the run's members were copied.
        for io, name, _ in three_volumes:
            assert _group_snapshots_left(io, name) == 0

        # With the writer stopped, a third run is byte-exact against the volumes.
        third = _run_plan(stack, plan["id"], "incremental")
        group = _group_of(stack, third)
        prefix = ceph.unique_name("grp-quiet") + "-"
        _restore_group(stack, group["id"], prefix)
        restored += [prefix + name for _, name, _ in three_volumes]
        for io, name, _ in three_volumes:
            assert ceph.sha256_of(volumes_pool, prefix + name) == ceph.sha256_of(io, name)
    finally:
        stack.delete(f"/v1/plans/{plan['id']}")
        for name in restored:
            ceph.remove_image(volumes_pool, name)


def test_a_group_plan_refuses_volumes_that_cannot_join_one_group(
        stack: Stack, volumes_pool: rados.Ioctx, offsite_volumes: rados.Ioctx,
        three_volumes: list[tuple[rados.Ioctx, str, str]]) -> None:
    far = ceph.unique_name("grp-far")
    rbd.RBD().create(offsite_volumes, far, 4 * MiB)
    try:
        across = stack.post("/v1/plans", {
            "name": ceph.unique_name("across"), "rules": RULES, "consistency": "group",
            "volumes": [three_volumes[0][2], f"ceph-b/volumes/{far}"]})
        assert across.status_code == 422, across.text
        assert "cannot span Ceph clusters" in across.json()["error"]["message"]

        first = stack.post("/v1/plans", {"name": ceph.unique_name("g1"), "rules": RULES,
                                         "consistency": "group",
                                         "volumes": [three_volumes[0][2]]})
        assert first.status_code == 201, first.text
        second = stack.post("/v1/plans", {"name": ceph.unique_name("g2"), "rules": RULES,
                                          "consistency": "group",
                                          "volumes": [three_volumes[0][2],
                                                      three_volumes[1][2]]})
        assert second.status_code == 409, second.text
        assert "one RBD group only" in second.json()["error"]["message"]
        stack.delete(f"/v1/plans/{first.json()['id']}")
    finally:
        ceph.remove_image(offsite_volumes, far)
