"""An RBD pool target (`CAIRN_BACKUP_TARGETS`): one backup image per protected volume
(`cairn.vol.<volume>`), each restore point a snapshot of it (`cairn.<rp>`), with its
checksum manifest (`cairn.manifest.<rp>`, sharded) and, while it is made, its checkpoint
(`cairn.checkpoint.<rp>`) as RADOS objects beside the images. Snapshots are independent:
any restore point is deleted in any order, and an instant restore clones one."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import ClassVar

import rados

from services.db import Database
from services.records.restore_points import OWNER_XATTR, SNAPSHOT
from services.settings import BackupTargetSettings, Settings
from services.status import RestorePointStatus
from services.storage import rbd_images
from services.storage.ceph import CephClusters
from services.targets.base import Configured
from services.targets.scans import Finding, OrphanScan, gone

log = logging.getLogger(__name__)

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_IMAGE = re.compile(rf"^cairn\.vol\.({_UUID})$")
_OBJECT = re.compile(rf"^cairn\.(?:manifest|checkpoint)\.({_UUID})(?:\.\d+)?$")
"""A manifest's head or shard, or a checkpoint."""


@dataclass(frozen=True)
class RbdPoolTarget(Configured[BackupTargetSettings]):
    kind: ClassVar[str] = "rbd"
    noun: ClassVar[str] = "RBD pool"
    unit: ClassVar[str] = "object"
    receives_copies: ClassVar[bool] = False
    sends_copies: ClassVar[bool] = True
    collects_garbage: ClassVar[bool] = False

    @property
    def cluster(self) -> str:
        return self.config.cluster

    @property
    def pool(self) -> str:
        return self.config.pool

    @property
    def location(self) -> str:
        return f"{self.config.cluster}/{self.config.pool}"

    @property
    def instant_restore_cluster(self) -> str | None:
        return self.config.cluster

    def probe(self, clusters: CephClusters, db: Database) -> bool:
        try:
            return clusters.pool_exists(self.cluster, self.pool)
        except Exception as exc:
            log.warning("backup target %s (%s/%s) did not answer: %s", self.name,
                        self.cluster, self.pool, exc)
            return False

    def scan_orphans(self, scan: OrphanScan, sharing: set[str]) -> None:
        with scan.clusters.ioctx(self.cluster, self.pool) as io:
            _scan_pool(scan, io, self.location, sharing)


def configured(settings: Settings) -> list[RbdPoolTarget]:
    """Every RBD pool target the settings name."""
    return [RbdPoolTarget(name, config, config.max_jobs or settings.max_jobs_per_target)
            for name, config in settings.backup_targets.items()]


def _scan_pool(scan: OrphanScan, io: rados.Ioctx, where: str, targets: set[str]) -> None:
    cutoff = scan.cutoff
    # Only restore points complete before the listing are judged: one that became
    # available during it may have written its manifest after the listing passed.
    listed_from = datetime.now(UTC)
    images = [n for n in rbd_images.image_names(io) if _IMAGE.match(n)]
    snaps: dict[str, dict[str, datetime]] = {}  # image -> cairn.<rp> -> taken
    created: dict[str, datetime] = {}
    for name in images:
        times = rbd_images.snapshot_times(io, name)
        if times is not None:
            created[name] = times[0]
            snaps[name] = {n: t for n, t in times[1].items() if SNAPSHOT.match(n)}
    objects = rbd_images.object_times(io, _OBJECT)
    ids = {n.removeprefix("cairn.") for s in snaps.values() for n in s}
    ids |= {_object_owner(key) for key in objects}
    rows = scan.rows(ids)
    owners = {key: rbd_images.object_xattr(io, key, OWNER_XATTR) for key in objects
              if key.count(".") == 2 and _object_owner(key) not in rows}
    volumes = scan.volume_ids([n.removeprefix("cairn.vol.") for n in images]
                              + [o for o in owners.values() if o])
    live = scan.live_backups(targets)

    for name in images:
        volume_id = name.removeprefix("cairn.vol.")
        for snap, taken in sorted(snaps.get(name, {}).items() if volume_id in volumes
                                  else ()):
            rp_id = snap.removeprefix("cairn.")
            row = rows.get(rp_id)
            why = gone(row)
            if row is not None and why is None and (row.volume_id != volume_id
                                                    or row.target not in targets):
                why = f"restore point {rp_id} belongs to another volume or target"
            if why is not None and taken < cutoff:
                scan.act(Finding("remove", "backup snapshot", f"{where}/{name}@{snap}", why,
                                 rp_id),
                         partial(_remove_snapshot, io, name, snap))
        if volume_id not in volumes:
            # Not this installation's volume (another Cairn sharing the pool?): its
            # snapshots and image are not ours to judge.
            if created.get(name, cutoff) < cutoff:
                scan.note(Finding("report", "backup image", f"{where}/{name}",
                                  f"no volume row {volume_id} in this Cairn; left alone"))
            continue
        if not _snaps_now(io, name) \
                and volume_id not in live and created.get(name, cutoff) < cutoff:
            scan.act(Finding(
                "remove", "backup image", f"{where}/{name}",
                f"it holds no restore point of volume {volume_id} and no backup of it "
                "is running"), partial(rbd_images.remove_image, io, name))

    heads = {_object_owner(k) for k in objects if k.startswith("cairn.manifest.")
             and k.count(".") == 2}
    for key, mtime in sorted(objects.items()):
        rp_id = _object_owner(key)
        is_head = key.count(".") == 2
        if not is_head or mtime >= cutoff:
            continue  # a manifest's shards go with its head
        row = rows.get(rp_id)
        what = "manifest" if key.startswith("cairn.manifest.") else "checkpoint"
        why = gone(row)
        if what == "checkpoint" and why is None and row is not None \
                and row.status != RestorePointStatus.CREATING:
            # Never part of a restore point's data, locked or not.
            why = f"restore point {rp_id} is {row.status}, no longer being created"
        if why is None:
            continue
        if row is None and owners.get(key) not in volumes:
            # No row, and no volume row of ours named on it: another installation's (or a
            # tool's) object sharing the pool.
            scan.note(Finding(
                "report", what, f"{where}/{key}", "no restore point row, and it names no "
                "volume of this Cairn; left alone", rp_id))
            continue
        parts = sorted(k for k in objects if k == key or k.startswith(f"{key}."))
        scan.act(Finding("remove", what, f"{where}/{key}", why, rp_id),
                 partial(_remove_objects, io, parts))

    # Available restore points whose data is gone can no longer be restored.
    for rp in scan.available(targets, listed_from):
        image = f"cairn.vol.{rp.volume_id}"
        missing = []
        if f"cairn.{rp.id}" not in snaps.get(image, {}):
            missing.append(f"its backup snapshot {where}/{image}@cairn.{rp.id}")
        if rp.id not in heads:
            missing.append(f"its checksum manifest {where}/cairn.manifest.{rp.id}")
        if missing:
            reason = (f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} "
                      "gone from the backup pool: this restore point can no longer be "
                      "restored")
            scan.act(Finding("flag", "restore point", f"{where}/{image}", reason, rp.id),
                     partial(scan.flag, rp.id, reason))


def _snaps_now(io: rados.Ioctx, name: str) -> bool:
    """Whether the image holds any snapshot now (after this run's removals)."""
    times = rbd_images.snapshot_times(io, name)
    return times is None or bool(times[1])


def _object_owner(key: str) -> str:
    match = _OBJECT.match(key)
    assert match is not None
    return match.group(1)


def _remove_snapshot(io: rados.Ioctx, image: str, snap: str) -> None:
    with rbd_images.open_image(io, image) as handle:
        rbd_images.remove_snapshot(handle, snap)


def _remove_objects(io: rados.Ioctx, keys: list[str]) -> None:
    for key in keys:
        rbd_images.remove_object(io, key)
