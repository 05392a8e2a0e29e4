"""What a test database's Cairn left on the stack's servers, removed when the database goes.

Tests remove the images they make, but not the backups Cairn made of them: their restore
points live in the session's database, which is dropped at the end, and their backup
images, manifests and checkpoints used to stay in the backup pools for good. A stack used
for a while (several runs, or several sessions side by side under pytest-xdist) then
filled its memstore OSD, whose 4 GiB are RAM, and every later write blocked. Now each
database takes its own data with it: what its volume and restore point rows name, and
nothing else, so sessions sharing the pools never touch each other's."""

from __future__ import annotations

import rados
import rbd
import sqlalchemy

from services.db import make_engine
from services.records.restore_points import (
    backup_image_name,
    checkpoint_object_name,
    manifest_object_name,
)
from tests.support import ceph

RBD_TARGETS = (("ceph-a", "backups"), ("ceph-b", "backups"))
"""The backup pools of every RBD target the tests configure (tests/support/stack.py)."""
MANIFEST_SHARDS = 1
"""Shards tried beside a manifest's head: one holds 256 GiB of volume, tests make MiB."""


def _rows(url: str) -> tuple[list[str], list[str]]:
    engine = make_engine(url)
    try:
        with engine.connect() as db:
            volumes = list(db.scalars(sqlalchemy.text("SELECT id FROM volumes")))
            points = list(db.scalars(sqlalchemy.text("SELECT id FROM restore_points")))
    finally:
        engine.dispose()
    return volumes, points


def _remove_image(io: rados.Ioctx, name: str) -> None:
    try:
        with rbd.Image(io, name) as image:
            for snap in image.list_snaps():
                if image.is_protected_snap(snap["name"]):
                    image.unprotect_snap(snap["name"])
                image.remove_snap(snap["name"])
        rbd.RBD().remove(io, name)
    except rbd.ImageNotFound:
        pass


def release(url: str) -> list[str]:
    """Remove the backup images of the database's volumes and the manifests and checkpoints
    of its restore points from the tests' backup pools. Returns what could not be removed
    (say, a backup snapshot a clone still stands on), for the caller to report."""
    try:
        volumes, points = _rows(url)
    except sqlalchemy.exc.SQLAlchemyError:
        return []  # never migrated, or gone already: it made nothing
    left: list[str] = []
    for cluster, pool in RBD_TARGETS:
        try:
            left += _release_pool(cluster, pool, volumes, points)
        except (rados.Error, rbd.Error) as exc:  # a cluster that does not answer
            left.append(f"{cluster}/{pool}: {type(exc).__name__}: {exc}")
    return left


def _release_pool(cluster: str, pool: str, volumes: list[str], points: list[str]) -> list[str]:
    left = []
    with ceph.ioctx(cluster, pool) as io:
        present = set(rbd.RBD().list(io))  # one read, however many rows the tests made
        for name in (backup_image_name(v) for v in volumes if backup_image_name(v) in present):
            try:
                _remove_image(io, name)
            except (rados.Error, rbd.Error) as exc:
                left.append(f"{cluster}/{pool}/{name}: {type(exc).__name__}: {exc}")
        # Small objects, most of them absent: all at once, then wait for them.
        removals = [io.aio_remove(name) for point in points for name in (
            checkpoint_object_name(point), manifest_object_name(point),
            *(f"{manifest_object_name(point)}.{n}" for n in range(MANIFEST_SHARDS)))]
        for removal in removals:
            removal.wait_for_complete()
    return left
