"""A model-based differential test of the data path: a seeded random program of volume
changes, backups, restores, deletes and worker kills against the real stack, checked after
every step against a model that is only the volume's bytes (a bytearray) at each backup.

Every case prints its seed and the steps it ran, so a failure replays with
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
from tests.support.stack import Stack

OBJECT = 4 * MiB
TARGETS = {"local": ("ceph-a", "backups"), "offsite": ("ceph-b", "backups")}


@dataclass
class Limits:
    max_size: int = 20 * MiB
    backups: tuple[int, int] = (2, 3)
    kill_chance: float = 0.1


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
    log: list[str] = field(default_factory=list)
    points: dict[str, Point] = field(default_factory=dict)
    images: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.name = ceph.unique_name(f"model-{self.seed}")
        self.data = bytearray()
        self.last_target = ""

    # -- the program -------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            steps = "\n  ".join(self.log)
            raise AssertionError(
                f"model case seed={self.seed} failed: {exc}\nreplay: make soak SEED={self.seed} "
                f"CASES=1\nsteps:\n  {steps}") from exc
        finally:
            self._clean_up()

    def _run(self) -> None:
        self._make_volume()
        for _ in range(self.rng.randint(*self.limits.backups)):
            for _ in range(self.rng.randint(0, 4)):
                self._change()
            self._backup()
            self.check()
            if self.points and self.rng.random() < 0.3:
                self._delete(self.rng.choice(sorted(self.points)))
                self.check()

    def _step(self, text: str) -> None:
        self.log.append(text)

    # -- the volume ---------------------------------------------------------------------
    def _size(self) -> int:
        roll = self.rng.random()
        if roll < 0.1:
            return self.rng.randint(1, 4096)
        if roll < 0.3:
            return self.rng.randint(1, 8) * OBJECT  # aligned
        return self.rng.randint(1, self.limits.max_size)

    def _make_volume(self) -> None:
        size = self._size()
        if self.rng.random() < 0.25:
            parent = f"{self.name}-parent"
            self.images.append(parent)
            rbd.RBD().create(self.vols, parent, size)
            with rbd.Image(self.vols, parent) as image:
                payload = self._bytes(size)
                image.write(payload, 0)
                image.create_snap("base")
                image.protect_snap("base")
            rbd.RBD().clone(self.vols, parent, "base", self.vols, self.name,
                            features=rbd.RBD_FEATURE_LAYERING | rbd.RBD_FEATURE_EXCLUSIVE_LOCK
                            | rbd.RBD_FEATURE_OBJECT_MAP | rbd.RBD_FEATURE_FAST_DIFF)
            self.images.insert(0, self.name)
            self.data = bytearray(payload)
            self._step(f"clone of a {size}-byte parent")
            return
        rbd.RBD().create(self.vols, self.name, size)
        self.images.insert(0, self.name)
        self.data = bytearray(size)
        self._step(f"create {size} bytes")
        if self.rng.random() < 0.8:
            self._write()

    def _bytes(self, n: int) -> bytes:
        return self.rng.randbytes(n)

    def _span(self) -> tuple[int, int]:
        size = len(self.data)
        if self.rng.random() < 0.35:
            # Whole objects: what makes an incremental clear objects on the target (a
            # discard or zeroing that empties an object).
            first = self.rng.randrange(-(-size // OBJECT))
            count = self.rng.randint(1, 3)
            offset = first * OBJECT
            return offset, min(count * OBJECT, size - offset)
        offset = self.rng.randrange(size)
        length = self.rng.randint(1, min(size - offset, self.rng.choice((512, 65536, OBJECT,
                                                                          3 * OBJECT))))
        return offset, length

    def _write(self) -> None:
        offset, length = self._span()
        payload = self._bytes(length)
        with rbd.Image(self.vols, self.name) as image:
            image.write(payload, offset)
        self.data[offset:offset + length] = payload
        self._step(f"write {length} at {offset}")

    def _zero(self) -> None:
        offset, length = self._span()
        with rbd.Image(self.vols, self.name) as image:
            if self.rng.random() < 0.5:
                image.write(bytes(length), offset)
                how = "write zeros"
            else:
                image.write_zeroes(offset, length)
                how = "write_zeroes"
        self.data[offset:offset + length] = bytes(length)
        self._step(f"{how} {length} at {offset}")

    def _discard(self) -> None:
        offset, length = self._span()
        with rbd.Image(self.vols, self.name) as image:
            image.discard(offset, length)
            # A discard may leave data it cannot free (a partial object of a clone, or
            # under the discard granularity): the model follows what the volume reads.
            after = image.read(offset, length)
        self.data[offset:offset + length] = after
        self._step(f"discard {length} at {offset}")

    def _resize(self) -> None:
        new = self._size()
        with rbd.Image(self.vols, self.name) as image:
            image.resize(new)
        old = len(self.data)
        self.data = self.data[:new] + bytearray(max(0, new - old))
        self._step(f"resize {old} -> {new}")

    def _flatten(self) -> None:
        with rbd.Image(self.vols, self.name) as image:
            if image.parent_info() is None:
                return
            image.flatten()
        self._step("flatten")

    def _change(self) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            self._write()
        elif roll < 0.6:
            self._zero()
        elif roll < 0.75:
            self._discard()
        elif roll < 0.92:
            self._resize()
        else:
            with contextlib.suppress(rbd.ImageNotFound):  # parent_info: no parent
                self._flatten()

    # -- Cairn --------------------------------------------------------------------------
    def _backup(self) -> None:
        # Mostly the same target as last time: incremental chains are what is under test.
        target = (self.last_target if self.last_target and self.rng.random() < 0.75
                  else self.rng.choice(sorted(TARGETS)))
        self.last_target = target
        kind = self.rng.choice(("incremental", "incremental", "full"))
        kill = self.rng.random() < self.limits.kill_chance
        body: dict[str, Any] = {"volume": f"ceph-a/volumes/{self.name}", "target": target,
                                "kind": kind}
        if kill:
            body["qos_bytes_per_second"] = max(MiB, len(self.data) // 2)
        self._step(f"backup {kind} to {target}{' (worker killed)' if kill else ''}")
        response = self.stack.post("/v1/backups", body)
        assert response.status_code == 202, response.text
        job = response.json()
        if kill:
            self._kill_during(job["id"])
        done = self.stack.wait_job(job["id"], timeout=180)
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
        assert rp["size_bytes"] == len(self.data), (rp["size_bytes"], len(self.data))
        self.points[rp["id"]] = Point(rp["id"], target, len(self.data),
                                      hashlib.sha256(self.data).hexdigest(),
                                      _nonzero_objects(self.data))
        self._step(f"  -> restore point {rp['id']} ({rp['kind']})")
        verify = self.stack.post(f"/v1/restore-points/{rp['id']}/verify", {})
        assert verify.status_code == 202, verify.text
        verified = self.stack.wait_job(verify.json()["id"])
        assert verified["status"] == "succeeded", verified

    def _kill_during(self, job_id: str) -> None:
        deadline = time.monotonic() + self.rng.uniform(0.05, 1.5)
        while time.monotonic() < deadline:
            if self.stack.get(f"/v1/jobs/{job_id}").json()["status"] not in (
                    "queued", "running"):
                return
            time.sleep(0.02)
        self.stack.worker.kill()
        self.stack.worker.start("ready")

    def _delete(self, rp_id: str) -> None:
        self._step(f"delete {rp_id}")
        response = self.stack.delete(f"/v1/restore-points/{rp_id}")
        assert response.status_code == 202, response.text
        done = self.stack.wait_job(response.json()["id"])
        assert done["status"] == "succeeded", done
        del self.points[rp_id]

    def _restore(self, point: Point) -> None:
        target = f"{self.name}-r{len(self.log)}"
        kill = self.rng.random() < self.limits.kill_chance / 2
        body: dict[str, Any] = {"target": target}
        if kill:
            body["qos_bytes_per_second"] = max(MiB, point.size // 2)
        self._step(f"restore {point.id}{' (worker killed)' if kill else ''}")
        response = self.stack.post(f"/v1/restore-points/{point.id}/restore", body)
        assert response.status_code == 202, response.text
        if kill:
            self._kill_during(response.json()["id"])
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

    # -- the checks ---------------------------------------------------------------------
    def check(self) -> None:
        for point in list(self.points.values()):
            self._restore(point)
        listed = self.stack.get("/v1/restore-points",
                                volume=f"ceph-a/volumes/{self.name}", limit=100).json()
        available = {rp["id"] for rp in listed["restore_points"]
                     if rp["status"] == "available"}
        assert available == set(self.points), (available, set(self.points))
        with rbd.Image(self.vols, self.name, read_only=True) as image:
            cairn_snaps = [s["name"] for s in image.list_snaps()
                           if s["name"].startswith("cairn.")]
        assert len(cairn_snaps) <= max(1, len({p.target for p in self.points.values()})), \
            cairn_snaps
        volume_id = listed["restore_points"][0]["volume_id"] if listed["restore_points"] \
            else None
        if volume_id is not None:
            for target, (cluster, pool) in TARGETS.items():
                self._check_target(target, cluster, pool, volume_id)

    def _check_target(self, target: str, cluster: str, pool: str, volume_id: str) -> None:
        """The backup pool holds exactly the available restore points' snapshots and
        manifests, and no checkpoint of a finished backup."""
        mine = {p.id for p in self.points.values() if p.target == target}
        with ceph.ioctx(cluster, pool) as io:
            try:
                with rbd.Image(io, f"cairn.vol.{volume_id}", read_only=True) as image:
                    snaps = {s["name"] for s in image.list_snaps()}
            except rbd.ImageNotFound:
                snaps = set()
            assert snaps == {f"cairn.{i}" for i in mine}, (target, snaps, mine)
            for rp_id in mine:
                io.stat(f"cairn.manifest.{rp_id}")
            for rp_id in self._all_ids():
                try:
                    io.stat(f"cairn.checkpoint.{rp_id}")
                except rados.ObjectNotFound:
                    continue
                raise AssertionError(f"checkpoint of {rp_id} left on {target}")

    def _all_ids(self) -> list[str]:
        listed = self.stack.get("/v1/restore-points", volume=f"ceph-a/volumes/{self.name}",
                                limit=100).json()
        return [rp["id"] for rp in listed["restore_points"]]

    def _clean_up(self) -> None:
        # Best effort after a failed case: the failure itself is what must be seen.
        for rp_id in list(self.points):
            with contextlib.suppress(Exception):
                self._delete(rp_id)
        for position, name in enumerate(self.images):
            with contextlib.suppress(Exception):
                _unprotect_all(self.vols, name)
            try:
                remove_later_if_busy(self.vols, name)
            except Exception:  # a clean-up error must not hide the failure itself
                DEFERRED.append(name)
            if DEFERRED and DEFERRED[-1] == name:
                # A clone's parent can go only after the clone.
                DEFERRED.extend(self.images[position + 1:])
                return


DEFERRED: list[str] = []
"""Images a killed worker still watches (the OSDs drop the watch after ~30 s): removed at
the end of the session instead of making each case wait."""


def remove_later_if_busy(io: rados.Ioctx, name: str) -> None:
    try:
        ceph.remove_image(io, name, wait=0)
    except rbd.ImageBusy:
        DEFERRED.append(name)


def remove_deferred(io: rados.Ioctx) -> None:
    while DEFERRED:
        name = DEFERRED.pop(0)
        with contextlib.suppress(rbd.ImageNotFound):
            _unprotect_all(io, name)
        ceph.remove_image(io, name)


def _nonzero_objects(data: bytearray) -> int:
    return sum(1 for start in range(0, len(data), OBJECT)
               if data[start:start + OBJECT].strip(b"\0"))


def _unprotect_all(io: rados.Ioctx, name: str) -> None:
    with rbd.Image(io, name) as image:
        for snap in image.list_snaps():
            if image.is_protected_snap(snap["name"]):
                image.unprotect_snap(snap["name"])
