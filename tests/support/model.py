"""A model-based differential test of the data path: a seeded random program of volume
changes, backups, restores, deletes and worker kills against the real stack, checked after
every step against a model that is only the volume's bytes (a bytearray) at each backup
(tests/support/model_volume.py: the volume and its program).

Each case backs up to targets of one kind, and copies, restores instantly and collects
garbage where the targets' capabilities say Cairn must, or checks that it refuses where
they say it must not (tests/support/model_targets.py: which kind a seed draws, and how the
model looks at what each target stores).

Every case prints its seed, its targets and the steps it ran, so a failure replays with
`make soak SEED=<seed> CASES=1`."""

from __future__ import annotations

import contextlib
import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import restore_point
from tests.support.model_targets import (
    DEFAULT_TARGETS,
    CaseTargets,
    Collector,
    Layout,
    copy_answer,
    instant_answer,
    layout_of,
    next_target,
)
from tests.support.model_volume import Volume, remove_later_if_busy
from tests.support.stack import PROJECT, Stack

VOLUME_CLUSTER = "ceph-a"
"""Where the case's volume lives (ceph-a/volumes), and its restores: an instant restore
clones onto this cluster."""


@dataclass
class Limits:
    max_size: int = 20 * MiB
    backups: tuple[int, int] = (2, 3)
    kill_chance: float = 0.1
    copy_chance: float = 0.3
    """Of a backup: a copy of its restore point to another of the model's targets (queued
    or refused, as the two targets' capabilities say)."""
    instant_chance: float = 0.1
    """Of a restore point's restore in a check: an instant restore besides."""
    collect_chance: float = 0.5
    """Of a delete on a target that collects garbage: a collection right after it."""


@dataclass
class Point:
    """What the model knows of one restore point: the volume's bytes when it was taken."""

    id: str
    target: str
    size: int
    sha256: str
    objects: int
    """Objects of the source holding non-zero data (a restore may not allocate more)."""


@dataclass
class Case:
    stack: Stack
    seed: int
    vols: rados.Ioctx
    limits: Limits = field(default_factory=Limits)
    target_names: tuple[str, ...] = DEFAULT_TARGETS
    log: list[str] = field(default_factory=list)
    points: dict[str, Point] = field(default_factory=dict)
    """The available restore points the case's backups made (the main generator picks
    among them)."""
    copies: dict[str, Point] = field(default_factory=dict)
    """The available copies of them on other targets (`extra` picks among them)."""
    made: set[str] = field(default_factory=set)
    """Every restore point the case made, deleted and failed ones too."""
    written: set[str] = field(default_factory=set)
    """The targets the case sent backups or copies to."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        # What the targets' capabilities add (copies, instant restores, collections) draws
        # from a generator of its own: the main one makes the same draws on every kind.
        self.extra = random.Random(f"{self.seed}/targets")
        self.name = ceph.unique_name(f"model-{self.seed}")
        self.volume = Volume(self.vols, self.name, self.rng, self.limits.max_size, self.log)
        self.last_target = ""
        self.volume_id: str | None = None
        self.targets = CaseTargets.draw(self.stack.settings, self.target_names, self.seed)
        self.layouts: dict[str, Layout] = {}
        self.collector = Collector(self.stack.settings)

    # -- the program -------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            steps = "\n  ".join(self.log)
            chosen = "" if self.target_names == DEFAULT_TARGETS \
                else f" MODEL_TARGETS={','.join(self.target_names)}"
            raise AssertionError(
                f"model case seed={self.seed} ({self.targets.kind}: "
                f"{', '.join(sorted(set(self.targets.pair)))}) failed: {exc}\n"
                f"replay: make soak SEED={self.seed} CASES=1{chosen}\nsteps:\n  {steps}") \
                from exc
        finally:
            self._clean_up()

    def _run(self) -> None:
        self.volume.make()
        for _ in range(self.rng.randint(*self.limits.backups)):
            for _ in range(self.rng.randint(0, 4)):
                self.volume.change()
            self._backup()
            if self.copies and self.extra.random() < 0.3:
                self._delete(self.extra.choice(sorted(self.copies)))
            self.check()
            if self.points and self.rng.random() < 0.3:
                self._delete(self.rng.choice(sorted(self.points)))
                self.check()

    def _step(self, text: str) -> None:
        self.log.append(text)

    # -- Cairn --------------------------------------------------------------------------
    def _backup(self) -> None:
        target = next_target(self.rng, self.last_target, self.targets.pair)
        self.last_target = target
        kind = self.rng.choice(("incremental", "incremental", "full"))
        kill = self.rng.random() < self.limits.kill_chance
        body: dict[str, Any] = {"volume": f"ceph-a/volumes/{self.name}", "target": target,
                                "kind": kind}
        if kill:
            body["qos_bytes_per_second"] = max(MiB, len(self.volume.data) // 2)
        self._step(f"backup {kind} to {target}{' (worker killed)' if kill else ''}")
        self.written.add(target)
        response = self.stack.post("/v1/backups", body)
        assert response.status_code == 202, response.text
        job = response.json()
        if kill:
            self._kill_during(job["id"], self.rng)
        done = self.stack.wait_job(job["id"], timeout=180)
        self.made.add(done["restore_point_id"])
        rp = restore_point(self.stack, done["restore_point_id"]) \
            if done["status"] == "succeeded" else None
        if rp is None:
            # A failed backup is allowed (a kill can exhaust attempts), a lying one is not.
            listed = self.stack.get(f"/v1/restore-points/{done['restore_point_id']}")
            assert listed.status_code == 404 or listed.json()["status"] != "available", \
                (done, listed.text)
            self._step(f"  -> {done['status']}: {done.get('error')}")
            return
        assert rp["status"] == "available", rp
        assert rp["size_bytes"] == len(self.volume.data), (rp["size_bytes"], len(self.volume.data))
        self.volume_id = rp["volume_id"]
        point = Point(rp["id"], target, len(self.volume.data),
                      hashlib.sha256(self.volume.data).hexdigest(), self.volume.nonzero_objects())
        self.points[rp["id"]] = point
        self._step(f"  -> restore point {rp['id']} ({rp['kind']})")
        verify = self.stack.post(f"/v1/restore-points/{rp['id']}/verify", {})
        assert verify.status_code == 202, verify.text
        verified = self.stack.wait_job(verify.json()["id"])
        assert verified["status"] == "succeeded", verified
        if self.extra.random() < self.limits.copy_chance:
            self._copy(point)

    def _copy(self, source: Point) -> None:
        """A copy to another of the model's targets: queued, and then a restore point of
        its own holding the same bytes, when the source's target sends copies and the
        other receives them; refused otherwise."""
        others = [name for name in sorted(self.targets.every) if name != source.target]
        if not others:
            return
        dest = self.extra.choice(others)
        expected = copy_answer(self.targets.every[source.target], self.targets.every[dest])
        self._step(f"copy {source.id} to {dest}{'' if expected == 202 else ' (refused)'}")
        response = self.stack.post(f"/v1/restore-points/{source.id}/copy", {"target": dest})
        assert response.status_code == expected, response.text
        if expected != 202:
            return
        self.written.add(dest)
        done = self.stack.wait_job(response.json()["id"], timeout=180)
        self.made.add(done["restore_point_id"])
        assert done["status"] == "succeeded", done
        copy = restore_point(self.stack, done["restore_point_id"])
        assert (copy["status"], copy["copied_from_restore_point_id"], copy["size_bytes"]) \
            == ("available", source.id, source.size), copy
        self.copies[copy["id"]] = Point(copy["id"], dest, source.size, source.sha256,
                                        source.objects)
        self._step(f"  -> restore point {copy['id']}")

    def _kill_during(self, job_id: str, rng: random.Random) -> None:
        deadline = time.monotonic() + rng.uniform(0.05, 1.5)
        while time.monotonic() < deadline:
            if self.stack.get(f"/v1/jobs/{job_id}").json()["status"] not in (
                    "queued", "running"):
                return
            time.sleep(0.02)
        self.stack.worker.kill()
        self.stack.worker.start("ready")

    def _delete(self, rp_id: str, *, collect: bool = True) -> None:
        self._step(f"delete {rp_id}")
        response = self.stack.delete(f"/v1/restore-points/{rp_id}")
        assert response.status_code == 202, response.text
        done = self.stack.wait_job(response.json()["id"])
        assert done["status"] == "succeeded", done
        point = self.points.pop(rp_id, None) or self.copies.pop(rp_id)
        # The deleted restore point's chunks go with a collection, not with the delete; the
        # next check restores every restore point left, whose chunks it must have kept.
        if collect and self.targets.every[point.target].collects_garbage \
                and self.extra.random() < self.limits.collect_chance:
            self._step(f"collect garbage on {point.target}")
            self.collector.collect(point.target)

    def _restore(self, point: Point, rng: random.Random | None = None) -> None:
        rng = rng or self.rng
        target = f"{self.name}-r{len(self.log)}"
        kill = rng.random() < self.limits.kill_chance / 2
        body: dict[str, Any] = {"target": target}
        if kill:
            body["qos_bytes_per_second"] = max(MiB, point.size // 2)
        self._step(f"restore {point.id}{' (worker killed)' if kill else ''}")
        response = self.stack.post(f"/v1/restore-points/{point.id}/restore", body)
        assert response.status_code == 202, response.text
        if kill:
            self._kill_during(response.json()["id"], rng)
        done = self.stack.wait_job(response.json()["id"], timeout=180)
        try:
            assert done["status"] == "succeeded", done
            with rbd.Image(self.vols, target, read_only=True) as image:
                assert image.size() == point.size
            assert ceph.sha256_of(self.vols, target) == point.sha256, \
                f"restore of {point.id} differs from the volume at its backup"
            allocated = ceph.mapped_objects(self.vols, target)
            assert allocated <= point.objects * 1.01 + 1, (allocated, point.objects)
        finally:
            remove_later_if_busy(self.vols, target)

    def _instant_restore(self, point: Point) -> None:
        """An instant restore into a new image beside the volume: queued, and byte-exact once
        flattened, when the point's target holds a snapshot to clone on the volume's
        cluster; refused otherwise."""
        expected = instant_answer(self.targets.every[point.target], VOLUME_CLUSTER)
        target = f"{self.name}-i{len(self.log)}"
        self._step(f"instant restore {point.id}{'' if expected == 202 else ' (refused)'}")
        response = self.stack.post(f"/v1/restore-points/{point.id}/restore",
                                   {"target": target, "mode": "instant"})
        assert response.status_code == expected, response.text
        if expected != 202:
            return
        done = self.stack.wait_job(response.json()["id"], timeout=180)
        try:
            assert done["status"] == "succeeded", done
            assert ceph.sha256_of(self.vols, target) == point.sha256, \
                f"instant restore of {point.id} differs from the volume at its backup"
        finally:
            remove_later_if_busy(self.vols, target)

    # -- the checks ---------------------------------------------------------------------
    def check(self) -> None:
        for point in list(self.points.values()):
            self._restore(point)
            if self.extra.random() < self.limits.instant_chance:
                self._instant_restore(point)
        for point in list(self.copies.values()):
            self._restore(point, self.extra)
        listed = self.stack.get("/v1/restore-points",
                                volume=f"ceph-a/volumes/{self.name}", limit=100).json()
        available = {rp["id"] for rp in listed["restore_points"]
                     if rp["status"] == "available"}
        assert available == set(self.points) | set(self.copies), \
            (available, set(self.points), set(self.copies))
        with rbd.Image(self.vols, self.name, read_only=True) as image:
            cairn_snaps = [s["name"] for s in image.list_snaps()
                           if s["name"].startswith("cairn.")]
        # Source snapshots are taken for backups alone, one chain per target.
        assert len(cairn_snaps) <= max(1, len({p.target for p in self.points.values()})), \
            cairn_snaps
        made = self.made | {rp["id"] for rp in listed["restore_points"]}
        if self.volume_id is None and listed["restore_points"]:
            self.volume_id = listed["restore_points"][0]["volume_id"]
        held = list(self.points.values()) + list(self.copies.values())
        for name in self.targets.every:
            self._layout(name).check(
                PROJECT, self.volume_id, {p.id for p in held if p.target == name}, made)

    def _layout(self, name: str) -> Layout:
        if name not in self.layouts:
            self.layouts[name] = layout_of(self.stack.settings, name)
        return self.layouts[name]

    def _clean_up(self) -> None:
        # Best effort after a failed case: the failure itself is what must be seen.
        for rp_id in [*self.copies, *self.points]:
            with contextlib.suppress(Exception):
                self._delete(rp_id, collect=False)
        # What the case left on targets that collect garbage goes now.
        for name in sorted(self.written):
            if self.targets.every[name].collects_garbage:
                with contextlib.suppress(Exception):
                    self.collector.collect(name)
        self.collector.close()
        for layout in self.layouts.values():
            layout.close()
        self.volume.remove()
