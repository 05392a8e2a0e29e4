"""The orphan reconciler on the real micro Ceph: planted orphans (a backup snapshot, a
manifest and a checkpoint without a row, a stale source snapshot) are removed after the
grace period and never before; nothing that has a row is touched; what is not this Cairn's
is reported and left; an available restore point whose manifest was deleted by hand
becomes `error` with a reason."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import rados
import rbd

from services.base import utcnow
from services.db import Database
from services.jobs import factory
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.restore_points.instant import instant_image_name
from services.restore_points.marks import JOB_KEY
from services.restore_points.orphans import OrphanReconciler, Report
from services.status import JobStatus, RestoreMethod
from services.storage import rbd_images
from services.storage.ceph import CephClusters
from services.storage.object_layout import manifest_key
from services.storage.s3 import Bucket
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup, restore, restore_point
from tests.support.stack import CLOUD_ADMIN, HEADERS, Stack

pytestmark = pytest.mark.ceph

ADMIN = CLOUD_ADMIN


def _run(stack: Stack, *, apply: bool, grace: timedelta) -> Report:
    db = Database(stack.settings.database_url)
    clusters = CephClusters(stack.settings)
    try:
        return OrphanReconciler(db, clusters, stack.settings).run(apply=apply, grace=grace)
    finally:
        clusters.close()
        db.dispose()


def _exists(io: rados.Ioctx, name: str) -> bool:
    try:
        io.stat(name)
    except rados.ObjectNotFound:
        return False
    return True


def test_orphans_are_removed_after_the_grace_period_and_rows_are_never_touched(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    name = ceph.random_image(volumes_pool, "orphans", 9 * MiB + 11, seed=61)
    images.append(name)
    first = backup(stack, name)["restore_point_id"]
    kept = backup(stack, name)["restore_point_id"]
    gutted = backup(stack, name)["restore_point_id"]
    volume_id = restore_point(stack, kept)["volume_id"]
    backup_image = f"cairn.vol.{volume_id}"
    # A locked restore point is never touched.
    locked = stack.client.patch(f"/v1/restore-points/{kept}", headers=HEADERS,
                                json={"locked_until": "2099-01-01T00:00:00Z"})
    assert locked.status_code == 200, locked.text
    deleted = stack.delete(f"/v1/restore-points/{first}")
    assert stack.wait_job(deleted.json()["id"])["status"] == "succeeded"

    # Planted: a backup snapshot and a manifest without a row (named after this Cairn's
    # volume), a checkpoint of a finished backup, a stale source snapshot of the deleted
    # restore point, a source snapshot no row of this Cairn knows, a manifest of another
    # installation; and the manifest of an available restore point deleted by hand.
    stray = str(uuid.uuid4())
    with rbd.Image(backups_pool, backup_image) as image:
        image.create_snap(f"cairn.{stray}")
    backups_pool.write_full(f"cairn.manifest.{stray}", b"head")
    backups_pool.set_xattr(f"cairn.manifest.{stray}", "cairn.volume_id", volume_id.encode())
    backups_pool.write_full(f"cairn.manifest.{stray}.0", b"shard")
    backups_pool.write_full(f"cairn.checkpoint.{kept}", b"")
    foreign = str(uuid.uuid4())
    backups_pool.write_full(f"cairn.manifest.{foreign}", b"someone else's")
    unknown = str(uuid.uuid4())
    with rbd.Image(volumes_pool, name) as image:
        image.create_snap(f"cairn.{first}")
        image.create_snap(f"cairn.{unknown}")
    backups_pool.remove_object(f"cairn.manifest.{gutted}")

    try:
        # Within the grace period nothing is removed; the gutted one is flagged at once.
        young = _run(stack, apply=True, grace=timedelta(hours=1))
        # The pools are shared with the stacks of the tests beside this one (other
        # databases): their backups are "report"ed, not this test's subject.
        mine = (volume_id, name, stray, foreign, unknown, first, kept, gutted)
        ours = [f for f in young.findings if any(part in f.location for part in mine)]
        assert {f.action for f in ours} == {"flag"}, young.findings
        assert _exists(backups_pool, f"cairn.manifest.{stray}")
        assert f"cairn.{first}" in ceph.snapshots(volumes_pool, name)
        gone = restore_point(stack, gutted)
        assert gone["status"] == "error"
        assert "manifest" in gone["status_reason"]
        assert "can no longer be restored" in gone["status_reason"]

        # The API lists what would be done, for administrators only.
        assert stack.get("/v1/orphans", grace_seconds=0).status_code == 403
        listed = stack.get("/v1/orphans", ADMIN, grace_seconds=0)
        assert listed.status_code == 200, listed.text
        by_location = {f["location"]: f for f in listed.json()["findings"]}
        assert by_location[f"ceph-a/backups/{backup_image}@cairn.{stray}"]["action"] == "remove"
        assert by_location[f"ceph-a/backups/cairn.manifest.{stray}"]["action"] == "remove"
        assert by_location[f"ceph-a/backups/cairn.checkpoint.{kept}"]["action"] == "remove"
        assert by_location[f"ceph-a/volumes/{name}@cairn.{first}"]["action"] == "remove"
        assert by_location[f"ceph-a/volumes/{name}@cairn.{unknown}"]["action"] == "report"
        assert by_location[f"ceph-a/backups/cairn.manifest.{foreign}"]["action"] == "report"
        assert "no restore point row" in \
            by_location[f"ceph-a/backups/cairn.manifest.{stray}"]["reason"]
        # A dry run changed nothing.
        assert _exists(backups_pool, f"cairn.manifest.{stray}")

        done = _run(stack, apply=True, grace=timedelta(0))
        assert not done.errors, done.errors
        assert f"cairn.{stray}" not in ceph.snapshots(backups_pool, backup_image)
        assert not _exists(backups_pool, f"cairn.manifest.{stray}")
        assert not _exists(backups_pool, f"cairn.manifest.{stray}.0")
        assert not _exists(backups_pool, f"cairn.checkpoint.{kept}")
        source = ceph.snapshots(volumes_pool, name)
        assert f"cairn.{first}" not in source
        assert f"cairn.{unknown}" in source            # reported, left alone
        assert _exists(backups_pool, f"cairn.manifest.{foreign}")
        # What has a row is intact: the locked restore point still restores exactly.
        assert restore_point(stack, kept)["status"] == "available"
        assert _exists(backups_pool, f"cairn.manifest.{kept}")
        target = ceph.unique_name("afterorphans")
        images.append(target)
        restore(stack, kept, target)
        # (the volume was not written between its backups)
        assert ceph.sha256_of(volumes_pool, target) == ceph.sha256_of(volumes_pool, name)
    finally:
        backups_pool.remove_object(f"cairn.manifest.{foreign}")
        stack.client.patch(f"/v1/restore-points/{kept}", headers=ADMIN,
                           json={"locked_until": None})


def test_clones_of_instant_restores_that_ended_unhanded_are_removed_and_no_other(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """A crash can stop an instant restore's undo; its clone would then keep the restore
    point from ever being deleted. Only a clone that leads back to an ended job is removed."""
    name = ceph.random_image(volumes_pool, "instorph", 6 * MiB + 5, seed=67)
    images.append(name)
    rp_id = backup(stack, name)["restore_point_id"]
    db = Database(stack.settings.database_url)
    clusters = CephClusters(stack.settings)
    now = utcnow()
    jobs = {what: str(uuid.uuid4()) for what in ("failed", "crashed", "foreign", "recent")}
    clones = {what: instant_image_name(job_id) for what, job_id in jobs.items()}
    marks = {"failed": jobs["failed"], "crashed": None, "foreign": str(uuid.uuid4()),
             "recent": jobs["recent"]}
    try:
        with db.session() as session:
            rp = session.get_one(RestorePoint, rp_id)
            for what, job_id in jobs.items():
                ended_at = now - (timedelta(minutes=5) if what == "recent" else timedelta(hours=3))
                into = factory.NewImage(f"ceph-a/volumes/{clones[what]}",
                                        RestoreMethod.INSTANT)
                session.add(Job(**{**factory.restore(rp, into, job_id=job_id, max_attempts=3),
                                   "status": JobStatus.FAILED, "finished_at": ended_at,
                                   "error_code": "storage", "error_message": "planted"}))
            backup_image, snapshot = rp.backup_image, rp.snapshot
        with clusters.ioctx("ceph-a", "backups") as backups_io, \
                clusters.ioctx("ceph-a", "volumes") as volumes_io:
            for what, clone in clones.items():
                rbd_images.clone_snapshot(backups_io, backup_image, snapshot, volumes_io, clone)
                images.append(clone)
                mark = marks[what]
                if mark is not None:
                    with rbd.Image(volumes_io, clone) as image:
                        image.metadata_set(JOB_KEY, mark)

        report = _run(stack, apply=True, grace=timedelta(hours=1))

        found = {f.location.rsplit("/", 1)[1]: f for f in report.findings
                 if f.what == "instant restore clone"}
        # Its metadata names the job, or (the worker died between the clone and the
        # metadata) it is a clone of that job's restore point: removed.
        assert found[clones["failed"]].action == "remove"
        assert found[clones["crashed"]].action == "remove"
        # Named after a job but marked by another: not provably this job's.
        assert found[clones["foreign"]].action == "report"
        assert "left alone" in found[clones["foreign"]].reason
        # Within the grace period: not looked at yet.
        assert clones["recent"] not in found
        with clusters.ioctx("ceph-a", "backups") as backups_io:
            children = rbd_images.snapshot_children(backups_io, backup_image, snapshot)
        assert sorted(children) == sorted(f"volumes/{clones[w]}" for w in ("foreign", "recent"))
    finally:
        clusters.close()
        db.dispose()


def test_manifests_on_the_object_target_that_no_row_owns_any_more_are_removed(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """A backup whose undo could not reach the store leaves its manifest, which would keep
    its chunks from every collection. Only a row can say a manifest may go."""
    if "s3" not in stack.settings.object_targets:
        pytest.fail("the local RGW is not running: start the stack with CAIRN_RGW=1")
    bucket = Bucket(stack.settings.object_targets["s3"])
    name = ceph.random_image(volumes_pool, "s3orph", 5 * MiB + 3, seed=71)
    images.append(name)
    kept, deleted, gutted = (backup(stack, name, target="s3")["restore_point_id"]
                             for _ in range(3))
    project = restore_point(stack, kept)["project_id"]
    blob = bucket.get(manifest_key(project, deleted), limit=MiB)
    assert blob is not None
    removal = stack.delete(f"/v1/restore-points/{deleted}")
    assert stack.wait_job(removal.json()["id"])["status"] == "succeeded"
    # Planted: the deleted restore point's manifest back in place (its delete's removal
    # lost), a manifest no row knows, a key Cairn never names; and the manifest of an
    # available restore point deleted by hand.
    stray = str(uuid.uuid4())
    bucket.put(manifest_key(project, deleted), blob)
    bucket.put(manifest_key(project, stray), blob)
    bucket.put(f"manifests/{project}/notes.txt", b"not a manifest")
    bucket.delete(manifest_key(project, gutted))
    try:
        young = _run(stack, apply=True, grace=timedelta(hours=1))
        assert not young.errors, young.errors
        assert [(f.action, f.restore_point_id) for f in young.findings
                if f.location.startswith("object target s3")] == [("flag", gutted)]
        assert bucket.size(manifest_key(project, deleted)) is not None
        gone = restore_point(stack, gutted)
        assert gone["status"] == "error"
        assert "manifest" in gone["status_reason"]

        done = _run(stack, apply=True, grace=timedelta(0))
        assert not done.errors, done.errors
        found = {f.restore_point_id: f for f in done.findings
                 if f.location.startswith("object target s3")}
        assert found[deleted].action == "remove"
        assert "is deleted" in found[deleted].reason
        assert found[stray].action == "report"
        assert bucket.size(manifest_key(project, deleted)) is None
        assert bucket.size(manifest_key(project, stray)) is not None   # left alone
        assert bucket.size(f"manifests/{project}/notes.txt") is not None
        # What a row owns is intact: the kept restore point still restores exactly.
        assert restore_point(stack, kept)["status"] == "available"
        target = ceph.unique_name("s3afterorphans")
        images.append(target)
        restore(stack, kept, target)
        assert ceph.sha256_of(volumes_pool, target) == ceph.sha256_of(volumes_pool, name)
    finally:
        bucket.delete(manifest_key(project, stray))
        bucket.delete(f"manifests/{project}/notes.txt")
        bucket.close()
