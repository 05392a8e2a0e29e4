"""An object target's data key, made and used by real workers (two cairn-worker processes)
on the real RGW, through an S3 endpoint on loopback that forces races and answers as a
hostile bucket holder would (`tests/support/s3_proxy.py`):

- first backups of a fresh target racing to make its key make it exactly once, and every
  restore point restores byte for byte after the workers restart;
- a store that ignores the write's condition still gets nothing available that it cannot
  read back;
- a key removed from a target holding data stops backups with a reason (no new key beside
  data), reads say what is missing, deletes still work, and the key put back restores all;
- a key replaced while a backup runs fails that backup before it is available;
- objects answered longer than they can be are refused without being read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import rados
from prometheus_client import REGISTRY

from services.scheduler.probes import TargetProber
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
from tests.support.stack import HEADERS, Stack
from worker.engine import object_copy
from worker.engine.chunk_store import ChunkStore

pytestmark = [pytest.mark.ceph, pytest.mark.production_database_only]

TARGETS = ["race", "unconditional", "lost", "replaced", "hostile"]
ADMIN = {**HEADERS, "X-Roles": "admin"}


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


def test_a_store_that_ignores_the_condition_never_gets_an_unreadable_restore_point(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """Both key writes land; the backups that sealed with the key overwritten fail before
    they are available, and every available one reads back with the stored key (as a
    restarted worker would read it)."""
    prefix = keyed.prefixes["unconditional"]
    keyed.proxy.ignore_conditions(prefix)
    keyed.proxy.race_key_writes(prefix, writers=2)
    sources = tiny_volumes(volumes_pool, images, 6, seed=320)
    jobs = keyed.backups(list(sources), "unconditional")
    assert [w.status for w in keyed.proxy.key_writes(prefix)].count(200) >= 2
    failed = [j for j in jobs if j["status"] != "succeeded"]
    assert failed, "no backup sealed with the overwritten key: the race did not happen"
    for job in failed:
        assert job["error"]["code"] == "target_key_changed", job
        rp = keyed.get(f"/v1/restore-points/{job['restore_point_id']}").json()
        assert rp["status"] != "available", rp
    bucket = keyed.bucket("unconditional")
    try:
        reader = ChunkStore.open(bucket, "unconditional", rgw.OPERATOR_KEY)
        for job in jobs:
            if job["status"] == "succeeded":
                rp = keyed.get(f"/v1/restore-points/{job['restore_point_id']}").json()
                manifest = reader.read_manifest(rp["project_id"], rp["id"], rp["size_bytes"])
                assert object_copy.verify(reader, rp["project_id"], manifest)[1] == [], rp
            else:  # undone: its manifest is gone
                assert bucket.size(manifest_key("project-a", job["restore_point_id"])) is None
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
        orphans = keyed.get("/v1/orphans", ADMIN, grace_seconds=3600).json()
        assert any(f["what"] == "data key" and f["location"].endswith(f"lost/{DATA_KEY}")
                   for f in orphans["findings"]), orphans["findings"]
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


def _probed(keyed: Keyed, target: str) -> float | None:
    """`cairn_target_up` of `target` after a round of the scheduler's probes."""
    clusters = CephClusters(keyed.settings)
    try:
        TargetProber(keyed.settings, clusters).probe_once()
    finally:
        clusters.close()
    return REGISTRY.get_sample_value("cairn_target_up", {"target": target})


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


@pytest.mark.parametrize(("what", "announced", "code"), [
    ("chunks/", True, "data_corrupt"),
    ("chunks/", False, "data_corrupt"),
    (MANIFESTS, False, "data_corrupt"),
    (DATA_KEY, True, "target_key_unavailable"),
])
def test_an_object_answered_longer_than_it_can_be_is_refused_unread(
        keyed: Keyed, volumes_pool: rados.Ioctx, images: list[str], what: str,
        announced: bool, code: str) -> None:
    """The bucket's holder answers a chunk, a manifest or the key with 64 MiB (its length
    announced, or chunked with none): the restore fails naming the object, and the worker
    stopped reading at the most the object can be."""
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
    assert "more than the" in message, message
    assert sent < 16 * MiB, f"the worker read {sent} bytes of a {64 * MiB}-byte answer"
