"""What every kind of backup target is to the rest of Cairn: a `Target`. The domain (the
API's listing and checks, the leases, the prober, the fleet's gauges, the orphan
reconciler, the scheduler's garbage collection) asks a `Target` and never which kind it
holds; the worker's data paths are the other half of each kind (`worker/targets/`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from services.db import Database
from services.errors import TargetNotConfigured
from services.storage.ceph import CephClusters
from services.targets.scans import OrphanScan


class Target(Protocol):
    """One configured backup target: where restore points are kept, and what its kind can
    do. Made from the settings by the registry (`services/targets/__init__.py`), cheap to
    make: nothing here connects until a method is called."""

    kind: ClassVar[str]
    """The kind's name, as `GET /v1/targets` shows it and the worker's half is keyed."""
    noun: ClassVar[str]
    """What the kind is called in messages: "RBD pool", "object target"."""
    unit: ClassVar[str]
    """What one checksum of its manifests covers: "object", "chunk" (verify's findings)."""
    receives_copies: ClassVar[bool]
    """Whether restore points of another target may be copied here (off site)."""
    sends_copies: ClassVar[bool]
    """Whether its restore points may be copied to a target that receives copies."""
    collects_garbage: ClassVar[bool]
    """Whether it holds data no restore point owns until a garbage collection frees it
    (shared chunks), which cairn-scheduler then queues every `object_gc_interval_seconds`."""

    @property
    def name(self) -> str:
        """The operator's name of it, unique over every kind."""

    @property
    def max_jobs(self) -> int:
        """Copy jobs running at once against it (the leases' limit)."""

    @property
    def location(self) -> str:
        """Where its data lives, as the orphan reconciler names it: targets at one location
        (two RBD targets on one pool) are scanned once, together."""

    @property
    def instant_restore_cluster(self) -> str | None:
        """The Ceph cluster where an instant restore may clone its restore points'
        snapshots, or None when it holds no RBD snapshot to clone."""

    def probe(self, clusters: CephClusters, db: Database) -> bool:
        """Whether it answers and holds what Cairn's database says it holds (its data key);
        logs why not. Never raises."""

    def scan_orphans(self, scan: OrphanScan, sharing: set[str]) -> None:
        """Find (and with `scan.apply`, act on) the data at its location that no row owns,
        and flag its available restore points whose data is gone. `sharing`: the names of
        every target at this location (itself included). Raises when the location cannot
        be read; `OrphanScan.run` records that and goes on with the next."""


@runtime_checkable
class SnapshotTarget(Target, Protocol):
    """A target that keeps each restore point as an RBD snapshot of its volume's backup
    image (`cairn.vol.<volume>@cairn.<rp>`) in a Ceph pool: what the RBD data path writes,
    reads and measures, what an instant restore clones and what an off-site copy reads.
    The registry's `targets.snapshotted` finds one by name, never by kind."""

    @property
    def cluster(self) -> str:
        """The Ceph cluster of its pool."""

    @property
    def pool(self) -> str:
        """The pool holding its backup images, manifests and checkpoints."""


KindSettings = TypeVar("KindSettings")


@dataclass(frozen=True)
class Configured(Generic[KindSettings]):
    """One target as the settings make it (each kind's `configured`): the operator's name
    of it, its kind's settings and its job limit (its own `max_jobs`, or the service's).
    What its kind can do are class attributes of the kind's class (`Target`)."""

    name: str
    config: KindSettings
    max_jobs: int


def not_configured(name: str) -> TargetNotConfigured:
    """The refusal of a target the service does not configure (any more)."""
    return TargetNotConfigured(
        f"target {name!r} is not configured in this service (any more); its restore points "
        "stay until the operator configures it again", target=name)
