"""An object target's data key, made and used by real workers (two cairn-worker processes)
on the real RGW, through an S3 endpoint on loopback that forces races and answers as a
hostile bucket holder would (`tests/support/s3_proxy.py`), and recorded in Cairn's
database, its authority:

- first backups of a fresh target racing to make its key make it exactly once, and every
  restore point restores byte for byte after the workers restart;
- on a store that ignores the write's condition, racing writers and a writer that stalls
  before its key write until another's restore point is available (the review's blocker)
  all write the recorded key: every restore point restores;
- a key written over the target's later (an older worker, the bucket's holder) fails the
  jobs after it before anything is written, reads say so and call nothing corrupt, and the
  database's copy puts it back;
- a key replaced in the database and the bucket alike is told apart from corruption by
  the fingerprint each restore point records: verify, restore, the next incremental and
  garbage collection say `target_key_changed`;
- a key removed from a target holding data, or a target pointed at an empty prefix, stops
  backups with a reason (no new key), and flags no restore point;
- a target and restore points from before the database recorded keys are adopted and
  fingerprinted on first use;
- a key replaced while a backup runs fails that backup before it is available;
- objects answered longer than they can be are refused without being read."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import rados
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from sqlalchemy import delete, select, update

from api.main import create_app
from services.clock import clock_for
from services.errors import TargetKeyChanged
from services.records.object_target_keys import ObjectTargetKey
from services.records.restore_points import RestorePoint
from services.restore_points.orphans import OrphanReconciler
from services.scheduler.probes import TargetProber
from services.settings import Settings
from services.storage import key_records
from services.storage.ceph import CephClusters
from services.storage.object_keys import new_data_key, wrap_data_key
from services.storage.object_layout import DATA_KEY, MANIFESTS, manifest_key
from tests.support import ceph, rgw
from tests.support.ceph import MiB
from tests.support.object_workers import (
    ObjectWorkers,
    first_backups_then_restores,
    object_workers,
    tiny_volumes,
)
from tests.support.s3_proxy import S3Proxy
from tests.support.stack import BIN, CLOUD_ADMIN, HEADERS, Stack
from worker.engine import object_download
from worker.engine.chunk_store import ChunkStore
from worker.managers import object_gc
from worker.runtime import Runtime

pytestmark = [pytest.mark.ceph, pytest.mark.production_database_only]

TARGETS = ["race", "unconditional", "late", "overwritten", "rekeyed", "lost", "moved",
           "legacy", "replaced", "hostile"]


@dataclass
class Keyed(ObjectWorkers):
    proxy: S3Proxy


@pytest.fixture(scope="module")
def keyed(stack: Stack) -> Iterator[Keyed]:
    """Two workers of their own; each target of TARGETS fresh, reached through the proxy."""
    if "s3" not in stack.settings.object_targets:
        pytest.fail("the local RGW is not running: start the stack with CAIRN_RGW=1")
    proxy = S3Proxy(json.loads(rgw.CREDENTIALS.read_text())["endpoint"], rgw.CREDENTIALS)
    try:
        with object_workers(stack, TARGETS, endpoint=proxy.endpoint) as workers:
            yield Keyed(**vars(workers), proxy=proxy)
    finally:
        proxy.close()


def test_sixteen_first_backups_to_a_fresh_target_all_restore_after_a_restart(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """The acceptance of issue 31, with the race forced: the first key writes wait until
    two backups have each found no key, then go one at a time."""
    prefix = keyed.prefixes["race"]
    keyed.proxy.race_key_writes(prefix, writers=2)
    result = first_backups_then_restores(keyed, volumes_pool, "race", images, count=16)
    writes = keyed.proxy.key_writes(prefix)
    assert len(writes) >= 2, "the race this test is about did not happen"
    assert (result.backed_up, result.restored_exactly, result.failures) == (16, 16, [])
    assert [w.status for w in writes].count(200) == 1, \
        f"the data key was written more than once: {writes}"
    assert {w.body_sha256 for w in writes} == {_sha256(_recorded(keyed, "race").wrapped)}, \
        "a writer wrote another key than the one Cairn's database recorded"


def _recorded(keyed: Keyed, target: str) -> ObjectTargetKey:
    record = key_records.get(keyed.db, target)
    assert record is not None, f"Cairn's database records no key for {target}"
    return record


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_on_a_store_that_ignores_the_condition_racing_key_writes_all_store_the_recorded_key(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """Both key writes land (the store ignores If-None-Match), and both carry the key
    Cairn's database recorded first: every backup succeeds and every restore point reads
    back with the key stored (as a restarted worker reads it)."""
    prefix = keyed.prefixes["unconditional"]
    keyed.proxy.ignore_conditions(prefix)
    keyed.proxy.race_key_writes(prefix, writers=2)
    sources = tiny_volumes(volumes_pool, images, 6, seed=320)
    jobs = keyed.backups(list(sources), "unconditional")
    writes = keyed.proxy.key_writes(prefix)
    assert [w.status for w in writes].count(200) >= 2, \
        f"the key was not written twice: the race did not happen ({writes})"
    record = _recorded(keyed, "unconditional")
    assert {w.body_sha256 for w in writes} == {_sha256(record.wrapped)}, writes
    assert [j["status"] for j in jobs] == ["succeeded"] * 6, jobs
    bucket = keyed.bucket("unconditional")
    try:
        assert rgw.stored(bucket, DATA_KEY) == record.wrapped
        reader = ChunkStore.open(keyed.db, bucket, "unconditional", rgw.OPERATOR_KEY)
        for job in jobs:
            rp = keyed.get(f"/v1/restore-points/{job['restore_point_id']}").json()
            manifest = reader.read_manifest(rp["project_id"], rp["id"], rp["size_bytes"])
            assert object_download.verify(reader, rp["project_id"], manifest)[1] == [], rp
    finally:
        bucket.close()


def test_a_first_backup_stalled_before_its_key_write_never_breaks_an_available_restore_point(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """The review's blocker, in its order, through the real workers and the real RGW on a
    store that ignores If-None-Match: backup B finds no key and stalls just before its key
    write (a retry's backoff, a paused process); backup A stores the key, seals with it,
    and its restore point becomes available; then B's key write lands. Before the
    database recorded the key, B wrote a key of its own over A's, went on sealing with it,
    and A's restore point could no longer be read. Now B's late write carries the key the
    database recorded, the one A sealed with: A's restore point restores byte for byte,
    and so does B's."""
    prefix = keyed.prefixes["late"]
    keyed.proxy.ignore_conditions(prefix)
    held = keyed.proxy.hold_first_key_write(prefix)
    (late, late_sum), (first, first_sum) = tiny_volumes(volumes_pool, images, 2,
                                                         seed=360).items()
    stalled = keyed.post("/v1/backups", {"volume": f"ceph-a/volumes/{late}", "target": "late"})
    assert stalled.status_code == 202, stalled.text
    try:
        assert held.arrived.wait(60), "backup B never wrote the key: the stall did not happen"
        [made] = keyed.backups([first], "late")
        assert made["status"] == "succeeded", made
        rp = keyed.get(f"/v1/restore-points/{made['restore_point_id']}").json()
        assert rp["status"] == "available", rp
        writes_before = len(keyed.proxy.key_writes(prefix))
    finally:
        held.release.set()  # B's key write lands now
    resumed = keyed.wait_job(stalled.json()["id"])
    writes = keyed.proxy.key_writes(prefix)
    assert len(writes) == writes_before + 1, f"B's late key write did not come: {writes}"
    assert writes[-1].status == 200, f"B's late key write did not land: {writes}"
    record = _recorded(keyed, "late")
    assert {w.body_sha256 for w in writes} == {_sha256(record.wrapped)}, \
        "a key write carried another key than the one Cairn's database recorded"

    keyed.restart()  # nothing a worker held in memory is left
    restored = keyed.restores([made["restore_point_id"]], images)[made["restore_point_id"]]
    assert restored["status"] == "succeeded", \
        f"A's available restore point cannot be restored after B's late key write: {restored}"
    assert ceph.sha256_of(volumes_pool, restored["image"]) == first_sum
    assert resumed["status"] == "succeeded", resumed
    again = keyed.restores([resumed["restore_point_id"]], images)[resumed["restore_point_id"]]
    assert again["status"] == "succeeded", again
    assert ceph.sha256_of(volumes_pool, again["image"]) == late_sum


def test_a_late_write_of_another_key_stops_later_jobs_and_the_database_puts_it_back(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str], tmp_path: Path) -> None:
    """A key written over the target's after a restore point is available, by whoever does
    not go through Cairn's database (a worker of an older Cairn racing to make it, the
    bucket's holder, an operator's mistake): the next backup fails before anything is
    written, reads say the key changed and call nothing corrupt, the target counts as down,
    and the key put back from the database's copy makes everything readable again."""
    (first, first_sum), (second, _) = tiny_volumes(volumes_pool, images, 2, seed=370).items()
    [made] = keyed.backups([first], "overwritten")
    assert made["status"] == "succeeded", made
    recorded = _recorded(keyed, "overwritten")
    bucket = keyed.bucket("overwritten")
    try:
        bucket.put(DATA_KEY, wrap_data_key(rgw.OPERATOR_KEY, "overwritten", new_data_key()))

        [refused] = keyed.backups([second], "overwritten")
        assert refused["status"] == "failed", "a backup sealed with a key the database does " \
            "not record"
        assert refused["error"]["code"] == "target_key_changed", refused
        assert "not the one Cairn's database records" in refused["error"]["message"]
        assert "cairn-manage object-key export overwritten" in refused["error"]["message"]
        rp = keyed.get(f"/v1/restore-points/{refused['restore_point_id']}").json()
        assert rp["status"] == "error", rp
        assert bucket.size(manifest_key(rp["project_id"], rp["id"])) is None

        [unread] = keyed.restores([made["restore_point_id"]], images).values()
        assert (unread["status"], unread["error"]["code"]) == (
            "failed", "target_key_changed"), unread
        assert unread["image"] not in ceph.image_names(volumes_pool)
        verify = keyed.post(f"/v1/restore-points/{made['restore_point_id']}/verify", {})
        checked = keyed.wait_job(verify.json()["id"])
        assert checked["error"]["code"] == "target_key_changed", checked
        verification = keyed.get(f"/v1/restore-points/{made['restore_point_id']}").json()[
            "verification"]
        assert (verification or {}).get("status") != "corrupt", verification
        assert _probed(keyed, "overwritten") == 0

        copy = tmp_path / "overwritten.data-key"
        exported = subprocess.run(
            [str(BIN / "cairn-manage"), "object-key", "export", "overwritten", "--out",
             str(copy)], env={**os.environ, "CAIRN_DATABASE_URL": keyed.settings.database_url},
            capture_output=True, text=True, timeout=60, check=False)
        assert exported.returncode == 0, exported.stderr
        assert recorded.fingerprint in exported.stdout
        assert copy.read_bytes() == recorded.wrapped
        bucket.put(DATA_KEY, copy.read_bytes())

        assert _probed(keyed, "overwritten") == 1
        [restored] = keyed.restores([made["restore_point_id"]], images).values()
        assert restored["status"] == "succeeded", restored
        assert ceph.sha256_of(volumes_pool, restored["image"]) == first_sum
        [after] = keyed.backups([second], "overwritten")
        assert after["status"] == "succeeded", after
    finally:
        bucket.close()


def _runtime(keyed: Keyed) -> Runtime:
    return Runtime(keyed.settings, keyed.db, CephClusters(keyed.settings), "test-key-gc",
                   None, clock_for(None))  # type: ignore[arg-type]


def _gc_failures(target: str, reason: str) -> float:
    return REGISTRY.get_sample_value("cairn_object_gc_runs_total", {
        "target": target, "outcome": "failed", "reason": reason}) or 0.0


def test_restore_points_sealed_with_a_replaced_key_are_told_apart_from_corruption(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """The key replaced in the bucket and in Cairn's database alike (its record removed by
    hand, or a database restored from a dump older than the target: the bucket's new key is
    then adopted). Each restore point records the fingerprint of the key it was sealed
    with: a verify says `target_key_changed` and marks nothing corrupt, a restore is
    refused with that code, the next incremental fails instead of quietly making a full
    copy, and garbage collection stops and is counted as failed. The old key put back, all
    goes on."""
    [(source, source_sum)] = tiny_volumes(volumes_pool, images, 1, seed=380).items()
    [made] = keyed.backups([source], "rekeyed")
    assert made["status"] == "succeeded", made
    rp_id = made["restore_point_id"]
    bucket = keyed.bucket("rekeyed")
    try:
        kept = rgw.stored(bucket, DATA_KEY)
        assert kept is not None
        with keyed.db.session() as session:
            session.execute(delete(ObjectTargetKey).where(ObjectTargetKey.target == "rekeyed"))
        bucket.put(DATA_KEY, wrap_data_key(rgw.OPERATOR_KEY, "rekeyed", new_data_key()))

        verify = keyed.post(f"/v1/restore-points/{rp_id}/verify", {})
        checked = keyed.wait_job(verify.json()["id"])
        assert checked["status"] == "failed", checked
        assert checked["error"]["code"] == "target_key_changed", checked
        assert "is not corrupt" in checked["error"]["message"], checked
        rp = keyed.get(f"/v1/restore-points/{rp_id}").json()
        assert (rp["verification"] or {}).get("status") != "corrupt", rp
        assert rp["status"] == "available", rp

        [unread] = keyed.restores([rp_id], images).values()
        assert (unread["status"], unread["error"]["code"]) == (
            "failed", "target_key_changed"), unread

        [next_one] = keyed.backups([source], "rekeyed")
        assert next_one["status"] == "failed", f"a backup went on beside restore points " \
            f"sealed with another key: {next_one}"
        assert next_one["error"]["code"] == "target_key_changed", next_one

        failures = _gc_failures("rekeyed", "target_key_changed")
        with pytest.raises(TargetKeyChanged, match="sealed with data keys of fingerprint"):
            object_gc.collect(_runtime(keyed), "rekeyed", grace_seconds=0)
        assert _gc_failures("rekeyed", "target_key_changed") == failures + 1

        # The old key back, in the bucket and (adopted again) in the database.
        with keyed.db.session() as session:
            session.execute(delete(ObjectTargetKey).where(ObjectTargetKey.target == "rekeyed"))
        bucket.put(DATA_KEY, kept)
        [restored] = keyed.restores([rp_id], images).values()
        assert restored["status"] == "succeeded", restored
        assert ceph.sha256_of(volumes_pool, restored["image"]) == source_sum
        [incremental] = keyed.backups([source], "rekeyed")
        assert incremental["status"] == "succeeded", incremental
        assert keyed.get(f"/v1/restore-points/{incremental['restore_point_id']}").json()[
            "kind"] == "incremental"
        assert object_gc.collect(_runtime(keyed), "rekeyed", grace_seconds=0) is not None
    finally:
        bucket.close()


def test_a_target_whose_key_is_lost_refuses_backups_until_it_is_put_back(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    sources = tiny_volumes(volumes_pool, images, 2, seed=330)
    first, second = keyed.backups(list(sources), "lost")
    assert (first["status"], second["status"]) == ("succeeded", "succeeded")
    bucket = keyed.bucket("lost")
    try:
        kept = rgw.stored(bucket, DATA_KEY)
        assert kept is not None
        bucket.delete(DATA_KEY)  # by hand, or a partial copy of the bucket

        [refused] = keyed.backups([next(iter(sources))], "lost")
        assert refused["status"] == "failed", "a backup went on beside data without its key"
        assert refused["error"]["code"] == "target_key_missing", refused
        assert "holds manifests and chunks but no data key" in refused["error"]["message"]
        assert "Put back the key object" in refused["error"]["message"]
        assert "cairn-manage object-key export lost" in refused["error"]["message"]
        assert bucket.size(DATA_KEY) is None, "a new key was made beside the data"
        assert bucket.size(manifest_key("project-a", refused["restore_point_id"])) is None
        assert keyed.get(f"/v1/restore-points/{refused['restore_point_id']}").json()[
            "status"] == "error"

        # Reads say what is missing; none of them calls the restore point corrupt.
        [unread] = keyed.restores([first["restore_point_id"]], images).values()
        assert unread["status"] == "failed", unread
        assert unread["error"]["code"] == "target_key_missing", unread
        assert unread["image"] not in ceph.image_names(volumes_pool)
        verify = keyed.post(f"/v1/restore-points/{first['restore_point_id']}/verify", {})
        checked = keyed.wait_job(verify.json()["id"])
        assert checked["error"]["code"] == "target_key_missing", checked
        verification = keyed.get(f"/v1/restore-points/{first['restore_point_id']}").json()[
            "verification"]
        assert (verification or {}).get("status") != "corrupt", verification
        # A restore point can still be deleted: its manifest goes without a key.
        deleted = keyed.client.delete(f"/v1/restore-points/{second['restore_point_id']}",
                                      headers=HEADERS)
        assert keyed.wait_job(deleted.json()["id"])["status"] == "succeeded"
        assert bucket.size(manifest_key("project-a", second["restore_point_id"])) is None
        # The operator is told, and the target counts as down.
        found = [f for f in _orphan_report(keyed, "lost")["findings"]
                 if f["location"].startswith("object target lost/")]
        assert [(f["action"], f["what"], f["location"]) for f in found] == [
            ("report", "data key", f"object target lost/{DATA_KEY}")], found
        assert "holds manifests and chunks but no data key" in found[0]["reason"], found
        assert _probed(keyed, "lost") == 0

        bucket.put(DATA_KEY, kept)
        assert _probed(keyed, "lost") == 1
        [again] = keyed.restores([first["restore_point_id"]], images).values()
        assert again["status"] == "succeeded", again
        assert ceph.sha256_of(volumes_pool, again["image"]) == next(iter(sources.values()))
        [after] = keyed.backups([next(iter(sources))], "lost")
        assert after["status"] == "succeeded", after
    finally:
        bucket.close()


def _orphan_report(keyed: Keyed, target: str) -> dict[str, Any]:
    """`GET /v1/orphans` as the cloud's administrator, from an API whose only target is the
    object target `target` (a scan of every pool and bucket of the stack takes 10 s)."""
    with TestClient(create_app(_alone(keyed, target))) as api:
        answer = api.get("/v1/orphans", headers=CLOUD_ADMIN, params={"grace_seconds": 3600})
    assert answer.status_code == 200, answer.text
    report: dict[str, Any] = answer.json()
    return report


def _probed(keyed: Keyed, target: str) -> float | None:
    """`cairn_target_up` of `target` after a round of the scheduler's probes, of that
    target alone (each target probed costs a new S3 client and a few requests)."""
    alone = _alone(keyed, target)
    clusters = CephClusters(alone)
    try:
        TargetProber(alone, clusters, keyed.db).probe_once()
    finally:
        clusters.close()
    return REGISTRY.get_sample_value("cairn_target_up", {"target": target})


def _alone(keyed: Keyed, target: str) -> Settings:
    """The workers' settings with the object target `target` as the only target."""
    return keyed.settings.model_copy(update={
        "backup_targets": {}, "object_targets": {target: keyed.settings.object_targets[target]}})


def test_a_target_pointed_at_an_empty_prefix_gets_no_new_key_and_flags_nothing(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """What a target pointed at another, empty bucket or prefix sees (here: its prefix
    emptied): its key was stored there once, so no new key is made, nothing is written,
    the orphan report says where the key should be and flags none of its restore points,
    and the target counts as down. Back where its data is, it works again."""
    [(source, _)] = tiny_volumes(volumes_pool, images, 1, seed=390).items()
    [made] = keyed.backups([source], "moved")
    assert made["status"] == "succeeded", made
    bucket = keyed.bucket("moved")
    try:
        held = {stored.key: rgw.stored(bucket, stored.key)
                for stored in bucket.list(deadline=math.inf)}
        for key in held:
            bucket.delete(key)

        [refused] = keyed.backups([source], "moved")
        assert refused["status"] == "failed", "a new key was made where the target's was"
        assert refused["error"]["code"] == "target_key_missing", refused
        assert "points at another bucket and prefix" in refused["error"]["message"], refused
        assert list(bucket.list(deadline=math.inf)) == [], \
            "something was written to the empty prefix"
        # The orphan scan of this target alone (what an applied scan would act on).
        alone = _alone(keyed, "moved")
        clusters = CephClusters(alone)
        try:
            report = OrphanReconciler(keyed.db, clusters, alone).run(
                apply=False, grace=timedelta(0))
        finally:
            clusters.close()
        mine = [f for f in report.findings if "object target moved" in f.location]
        assert [(f.action, f.what) for f in mine] == [("report", "data key")], mine
        assert "pointed at another bucket and prefix" in mine[0].reason
        assert _probed(keyed, "moved") == 0

        for key, data in held.items():
            assert data is not None
            bucket.put(key, data)
        assert _probed(keyed, "moved") == 1
        [after] = keyed.backups([source], "moved")
        assert after["status"] == "succeeded", after
    finally:
        bucket.close()


def test_a_target_and_restore_points_from_before_keys_were_recorded_are_adopted(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """An existing deployment upgraded: the target's key is in its bucket and not in the
    database, its restore points record no fingerprint (this one not even its size, whose
    absence once bounded its manifest's read at 65 bytes). The first job adopts the
    bucket's key (once), and a restore point's manifest read with it gives it its
    fingerprint."""
    [(source, _)] = tiny_volumes(volumes_pool, images, 1, seed=395).items()
    [made] = keyed.backups([source], "legacy")
    assert made["status"] == "succeeded", made
    rp_id = made["restore_point_id"]
    bucket = keyed.bucket("legacy")
    try:
        stored = rgw.stored(bucket, DATA_KEY)
        with keyed.db.session() as session:
            session.execute(delete(ObjectTargetKey).where(ObjectTargetKey.target == "legacy"))
            session.execute(update(RestorePoint).where(RestorePoint.id == rp_id)
                            .values(key_fingerprint=None, size_bytes=None))

        verify = keyed.post(f"/v1/restore-points/{rp_id}/verify", {})
        checked = keyed.wait_job(verify.json()["id"])
        assert checked["status"] == "succeeded", checked
        record = _recorded(keyed, "legacy")
        assert (record.origin, record.wrapped) == ("adopted", stored)
        with keyed.db.session() as session:
            stamped = session.scalar(select(RestorePoint.key_fingerprint)
                                     .where(RestorePoint.id == rp_id))
        assert stamped == record.fingerprint
        [incremental] = keyed.backups([source], "legacy")
        assert incremental["status"] == "succeeded", incremental
        assert keyed.get(f"/v1/restore-points/{incremental['restore_point_id']}").json()[
            "kind"] == "incremental"
    finally:
        bucket.close()


def test_a_key_replaced_while_a_backup_runs_fails_that_backup_before_it_is_available(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """The key is replaced at the moment the backup stores its manifest: everything it
    sealed, it sealed with the key replaced."""
    first, second = tiny_volumes(volumes_pool, images, 2, seed=340)
    [made] = keyed.backups([first], "replaced")
    assert made["status"] == "succeeded", made
    bucket = keyed.bucket("replaced")
    try:
        kept = rgw.stored(bucket, DATA_KEY)
        assert kept is not None
        other = wrap_data_key(rgw.OPERATOR_KEY, "replaced", new_data_key())
        # An operator's mistake, or the bucket's holder.
        keyed.proxy.before_write(f"/{keyed.prefixes['replaced']}/{MANIFESTS}",
                                 lambda: bucket.put(DATA_KEY, other))
        [done] = keyed.backups([second], "replaced")
        assert done["status"] == "failed", done
        assert done["error"]["code"] == "target_key_changed", done
        assert "not the one this job sealed with" in done["error"]["message"]
        rp = keyed.get(f"/v1/restore-points/{done['restore_point_id']}").json()
        assert rp["status"] == "error", rp
        assert bucket.size(manifest_key("project-a", rp["id"])) is None

        bucket.put(DATA_KEY, kept)
        [again] = keyed.backups([second], "replaced")
        assert again["status"] == "succeeded", again
        [restored] = keyed.restores([again["restore_point_id"]], images).values()
        assert restored["status"] == "succeeded", restored
        assert ceph.sha256_of(volumes_pool, restored["image"]) == ceph.sha256_of(
            volumes_pool, second)
    finally:
        bucket.close()


@pytest.mark.parametrize(("what", "announced", "code", "says"), [
    ("chunks/", True, "data_corrupt", "more than the"),
    # No S3 store answers a GetObject without its length: refused at its head.
    ("chunks/", False, "storage_error", "without its length"),
    (MANIFESTS, False, "storage_error", "without its length"),
    (DATA_KEY, True, "target_key_unavailable", "more than the"),
])
def test_an_object_answered_longer_than_it_can_be_is_refused_unread(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str], what: str,
        announced: bool, code: str, says: str) -> None:
    """The bucket's holder answers a chunk, a manifest or the key with 64 MiB (its length
    announced, or chunked with none): the restore fails naming the object, and the worker
    stopped reading at the most the object can be (or, chunked, at the answer's head)."""
    sources = tiny_volumes(volumes_pool, images, 1, seed=350)
    [made] = keyed.backups(list(sources), "hostile")
    assert made["status"] == "succeeded", made
    keyed.proxy.answer_oversized(f"/{keyed.prefixes['hostile']}/{what}", announced=announced)
    try:
        [refused] = keyed.restores([made["restore_point_id"]], images).values()
    finally:
        sent = keyed.proxy.disarm_oversized()
    assert refused["status"] == "failed", refused
    assert refused["error"]["code"] == code, refused
    message = refused["error"]["message"]
    assert what in message, message
    assert says in message, message
    assert sent < 16 * MiB, f"the worker read {sent} bytes of a {64 * MiB}-byte answer"
