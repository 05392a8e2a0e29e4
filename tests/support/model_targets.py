"""The targets of the data-path model (tests/support/model.py): which ones a case backs up
to, what Cairn must answer for each, and how the model sees what each one stores.

What the model expects of a target it reads from the `Target` (`services/targets/`), never
from a kind's name: whether it sends or receives copies, the cluster an instant restore
may clone its snapshots on, whether it collects garbage. What it looks at behind Cairn's
back follows the family a target belongs to: the chunk format's manifests
(`targets.ChunkTarget`, whatever keeps its blobs), or the snapshots of an RBD pool's
backup images (a target an instant restore clones from). A fourth kind of either family
goes through the model as it is.

A case draws its kind from its seed: the kinds of the model's targets in name order, the
seed's remainder, so any run of as many seeds as there are kinds passes every kind once
(`make test`'s 12 cases are 4 of each kind, its 3 SQLite ones one of each). It backs up to
two targets of that kind, as the model always did (two RBD pools on two clusters), or to
the same one twice when the kind has one. The case's main generator makes the same draws
whatever the kind, so a seed is the same program of volume changes, backups, kills and
deletes on every kind; on the RBD kind, the program it was before the model knew other
kinds. What the other kinds bring (copies, instant restores, garbage collections) is drawn
from a second generator of the seed."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import rados
import rbd

from services import targets
from services.clock import clock_for
from services.db import Database
from services.settings import Settings
from services.storage.ceph import CephClusters
from services.storage.chunk_backend import ChunkBackend
from services.storage.object_layout import manifest_key
from tests.support import ceph
from worker.managers import object_gc
from worker.runtime import Runtime

DEFAULT_TARGETS = ("local", "offsite", "s3", "dir")
"""The stacks' targets the model uses (tests/support/stack.py): two RBD pools on two
clusters, the object target on the local RGW, the directory target. Not `limited`: it
shares `local`'s pool, so one volume's backups to both would share one backup image."""


def case_kind(seed: int, kinds: Iterable[str]) -> str:
    """The kind a case backs up to."""
    ordered = sorted(set(kinds))
    return ordered[seed % len(ordered)]


def pair(names: Iterable[str]) -> tuple[str, str]:
    """The two targets a case backs up to: its kind's first two by name, or its one twice."""
    ordered = sorted(names)
    return ordered[0], ordered[min(1, len(ordered) - 1)]


def next_target(rng: random.Random, last: str, both: tuple[str, str]) -> str:
    """Mostly the target of the last backup (incremental chains are what is under test),
    else either of the pair: the same draws whichever targets the pair holds."""
    return last if last and rng.random() < 0.75 else rng.choice(both)


def copy_answer(source: targets.Target, dest: targets.Target) -> int:
    """What `POST /v1/restore-points/{id}/copy` answers for a copy from `source` to `dest`:
    queued only from a target that sends copies to one that receives them."""
    return 202 if source.sends_copies and dest.receives_copies else 422


def instant_answer(held_on: targets.Target, cluster: str) -> int:
    """What an instant restore into a new image on `cluster` answers: queued only when the
    target holds a snapshot an instant restore clones there."""
    return 202 if held_on.instant_restore_cluster == cluster else 409


class Layout(Protocol):
    def check(self, project_id: str, volume_id: str | None, live: set[str],
              made: set[str]) -> None:
        """The target holds the data of exactly the `live` restore points among `made`
        (every restore point the case made, deleted ones too), and nothing a finished job
        left half-made."""

    def close(self) -> None:
        ...


@dataclass
class RbdSnapshots:
    """An RBD pool: a backup image per volume, a snapshot and a RADOS manifest per restore
    point, a checkpoint only while a backup runs."""

    name: str
    cluster: str
    pool: str

    def check(self, project_id: str, volume_id: str | None, live: set[str],
              made: set[str]) -> None:
        if volume_id is None:
            return  # no restore point was ever made: no image to look at
        with ceph.ioctx(self.cluster, self.pool) as io:
            try:
                with rbd.Image(io, f"cairn.vol.{volume_id}", read_only=True) as image:
                    snaps = {s["name"] for s in image.list_snaps()}
            except rbd.ImageNotFound:
                snaps = set()
            assert snaps == {f"cairn.{i}" for i in live}, (self.name, snaps, live)
            for rp_id in live:
                io.stat(f"cairn.manifest.{rp_id}")
            for rp_id in made:
                try:
                    io.stat(f"cairn.checkpoint.{rp_id}")
                except rados.ObjectNotFound:
                    continue
                raise AssertionError(f"checkpoint of {rp_id} left on {self.name}")

    def close(self) -> None:
        pass


@dataclass
class Manifests:
    """A chunk-format target: one sealed manifest per restore point (its chunks are shared,
    and freed by a garbage collection, not by a delete); no checkpoint."""

    name: str
    target: targets.ChunkTarget
    _backend: list[ChunkBackend] = field(default_factory=list)

    def check(self, project_id: str, volume_id: str | None, live: set[str],
              made: set[str]) -> None:
        if not self._backend:
            self._backend.append(self.target.backend())
        backend = self._backend[0]
        held = {rp_id for rp_id in made | live
                if backend.size(manifest_key(project_id, rp_id)) is not None}
        assert held == live, (self.name, held, live)

    def close(self) -> None:
        for backend in self._backend:
            backend.close()
        self._backend.clear()


def layout_of(settings: Settings, name: str) -> Layout:
    target = targets.get(settings, name)
    if isinstance(target, targets.ChunkTarget):
        return Manifests(name, target)
    if target.instant_restore_cluster is not None:
        pool = targets.snapshotted(settings, name)
        return RbdSnapshots(name, pool.cluster, pool.pool)
    raise AssertionError(
        f"the model knows no layout of target {name!r} (kind {target.kind}): neither the "
        "chunk format nor RBD snapshots; teach tests/support/model_targets.py to look at it")


@dataclass
class CaseTargets:
    """The model's targets as one case uses them."""

    kind: str
    pair: tuple[str, str]
    every: dict[str, targets.Target]
    """Every target of the model, by name: a case copies to and checks them all."""

    @classmethod
    def draw(cls, settings: Settings, names: Sequence[str], seed: int) -> CaseTargets:
        missing = [name for name in names if targets.find(settings, name) is None]
        assert not missing, (
            f"the stack has no target {', '.join(missing)}: the object target needs the "
            "local RGW (make up RGW=1), the others are in every stack "
            "(tests/support/stack.py); CAIRN_MODEL_TARGETS names the model's targets")
        every = {name: targets.get(settings, name) for name in names}
        kind = case_kind(seed, (target.kind for target in every.values()))
        return cls(kind, pair(n for n, t in every.items() if t.kind == kind), every)


class Collector:
    """Garbage collections of the model's targets, run here as cairn-scheduler queues them
    (every `object_gc_interval_seconds`, a day), with no grace: a chunk a live manifest
    names must survive any collection."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._rt: Runtime | None = None

    def collect(self, name: str) -> None:
        if self._rt is None:
            self._rt = Runtime(self.settings, Database(self.settings.database_url),
                               CephClusters(self.settings), "model-collector",
                               None, clock_for(None))  # type: ignore[arg-type]
        object_gc.collect(self._rt, name, grace_seconds=0)

    def close(self) -> None:
        if self._rt is not None:
            self._rt.clusters.close()
            self._rt.db.dispose()
            self._rt = None
