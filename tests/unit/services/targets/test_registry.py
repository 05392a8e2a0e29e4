"""The targets registry: every configured target found by name whatever its kind, the
refusals a user sees for a name the service does not configure (the same words as before
the registry), and the kinds listed in one place."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from api.routers.targets import list_targets
from services import targets
from services.db import Database
from services.errors import TargetNotConfigured, UnknownTarget
from services.records.restore_points import RestorePoint
from services.restore_points.orphans import OrphanReconciler
from services.settings import Settings
from services.targets.directory import DirectoryTarget
from services.targets.object_store import ObjectStoreTarget
from services.targets.rbd_pool import RbdPoolTarget
from services.targets.scans import OrphanScan

S3 = {"endpoint": "http://127.0.0.1:1", "bucket": "b", "credentials_file": "/nonexistent"}
SETTINGS = Settings(auth_strategy="noauth", environment="development",
                    clusters={"ceph-a": {"conf": "/etc/ceph/ceph.conf"}},
                    backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"},
                                    "other": {"cluster": "ceph-a", "pool": "backups",
                                              "max_jobs": 1}},
                    object_targets={"s3": {**S3, "max_jobs": 2}},
                    directory_targets={"nfs": {"path": "/srv/cairn-nfs", "max_jobs": 3}},
                    default_backup_target="s3", max_jobs_per_target=4)


def test_targets_of_every_kind_are_found_by_name_with_their_limits() -> None:
    assert targets.names(SETTINGS) == ["local", "nfs", "other", "s3"]
    local, other, s3, nfs = (targets.get(SETTINGS, name)
                             for name in ("local", "other", "s3", "nfs"))
    assert isinstance(local, RbdPoolTarget)
    assert isinstance(s3, ObjectStoreTarget)
    assert isinstance(nfs, DirectoryTarget)
    assert (local.location, s3.location, nfs.location) == (
        "ceph-a/backups", "object target s3", "/srv/cairn-nfs")
    assert (local.max_jobs, other.max_jobs, s3.max_jobs, nfs.max_jobs) == (4, 1, 2, 3)
    assert targets.job_limit(SETTINGS, "gone") == 4  # a job queued before it was removed
    assert targets.resolve(SETTINGS, None).name == "s3"
    assert targets.resolve(SETTINGS, "local") is not None
    assert targets.find(SETTINGS, "gone") is None


def test_what_each_kind_can_do_is_the_targets_to_say() -> None:
    local, s3, nfs = (targets.get(SETTINGS, name) for name in ("local", "s3", "nfs"))
    assert (local.instant_restore_cluster, s3.instant_restore_cluster,
            nfs.instant_restore_cluster) == ("ceph-a", None, None)
    assert (local.sends_copies, local.receives_copies) == (True, False)
    assert (s3.sends_copies, s3.receives_copies) == (False, True)
    assert (nfs.sends_copies, nfs.receives_copies) == (False, True)
    assert (local.collects_garbage, s3.collects_garbage, nfs.collects_garbage) == (
        False, True, True)
    assert (local.unit, s3.unit, nfs.unit) == ("object", "chunk", "chunk")


def test_an_unknown_target_is_refused_with_the_words_a_user_saw_before() -> None:
    with pytest.raises(TargetNotConfigured) as refused:
        targets.get(SETTINGS, "gone")
    assert refused.value.message == (
        "target 'gone' is not configured in this service (any more); its restore points "
        "stay until the operator configures it again")
    with pytest.raises(UnknownTarget) as unknown:
        targets.resolve(SETTINGS, "elsewhere")
    assert unknown.value.message == ("unknown backup target 'elsewhere'; configured targets: "
                                     "local, nfs, other, s3")
    bare = Settings(auth_strategy="noauth", environment="development")
    with pytest.raises(UnknownTarget) as nothing:
        targets.resolve(bare, None)
    assert nothing.value.message == "no backup target given; configured targets: none"


def test_a_restore_point_on_a_target_no_longer_configured_is_refused_with_the_reason() -> None:
    kept = RestorePoint(id="rp-1", project_id="p", volume_id="v", target="local")
    assert targets.holding(SETTINGS, kept).name == "local"
    dropped = RestorePoint(id="rp-2", project_id="p", volume_id="v", target="gone")
    with pytest.raises(TargetNotConfigured) as refused:
        targets.holding(SETTINGS, dropped)
    assert refused.value.message == (
        "restore point rp-2 is kept on target 'gone', which this service does not configure "
        "(any more): ask the operator to configure it again")


def test_the_kinds_are_the_registrys_and_the_api_lists_each_targets_own() -> None:
    assert targets.kinds() == ["rbd", "s3", "directory"]
    listed = list_targets(SETTINGS).targets
    assert [(t.name, t.kind, t.max_jobs, t.default) for t in listed] == [
        ("local", "rbd", 4, False), ("nfs", "directory", 3, False), ("other", "rbd", 1, False),
        ("s3", "s3", 2, True)]
    assert {t.kind for t in listed} <= set(targets.kinds())


def test_the_chunk_formats_data_path_finds_its_target_by_name_not_by_kind() -> None:
    s3, nfs = targets.chunked(SETTINGS, "s3"), targets.chunked(SETTINGS, "nfs")
    assert (s3.name, nfs.name) == ("s3", "nfs")
    assert (s3.config.chunk_size_mib, s3.config.uploads_in_flight) == (4, 10)
    assert (nfs.config.chunk_size_mib, nfs.config.uploads_in_flight) == (4, 10)
    with pytest.raises(TargetNotConfigured, match=r"target 'local' \(kind rbd\) keeps no chunks"):
        targets.chunked(SETTINGS, "local")
    with pytest.raises(TargetNotConfigured, match="target 'gone' is not configured"):
        targets.chunked(SETTINGS, "gone")


def test_what_only_a_target_keeping_rbd_snapshots_does_finds_it_by_name_not_by_kind() -> None:
    local, other = targets.snapshotted(SETTINGS, "local"), targets.snapshotted(SETTINGS, "other")
    assert [(t.name, t.cluster, t.pool) for t in (local, other)] == [
        ("local", "ceph-a", "backups"), ("other", "ceph-a", "backups")]
    for chunked in ("s3", "nfs"):
        with pytest.raises(TargetNotConfigured, match=rf"target '{chunked}' \(kind \w+\) keeps "
                           "no RBD snapshots"):
            targets.snapshotted(SETTINGS, chunked)
    with pytest.raises(TargetNotConfigured, match="target 'gone' is not configured"):
        targets.snapshotted(SETTINGS, "gone")


def test_an_rbd_pool_that_does_not_answer_is_down_not_an_error() -> None:
    class Unreachable:
        def pool_exists(self, cluster: str, pool: str) -> bool:
            raise TimeoutError(f"{cluster} did not answer")

    local = targets.get(SETTINGS, "local")
    assert local.probe(Unreachable(), None) is False  # type: ignore[arg-type]


def test_targets_on_one_pool_are_scanned_once_together_and_a_failure_stops_no_other(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    scanned: list[tuple[str, set[str]]] = []

    def rbd_scan(self: RbdPoolTarget, scan: OrphanScan, sharing: set[str]) -> None:
        scanned.append((self.location, sharing))
        raise ConnectionError("ceph-a is away")

    def chunk_scan(self: ObjectStoreTarget | DirectoryTarget, scan: OrphanScan,
                   sharing: set[str]) -> None:
        scanned.append((self.location, sharing))

    monkeypatch.setattr(RbdPoolTarget, "scan_orphans", rbd_scan)
    monkeypatch.setattr(ObjectStoreTarget, "scan_orphans", chunk_scan)
    monkeypatch.setattr(DirectoryTarget, "scan_orphans", chunk_scan)
    report = OrphanReconciler(db, None, SETTINGS).run(  # type: ignore[arg-type]
        apply=False, grace=timedelta(hours=1), now=datetime(2026, 11, 27, tzinfo=UTC))
    assert scanned == [("/srv/cairn-nfs", {"nfs"}), ("ceph-a/backups", {"local", "other"}),
                       ("object target s3", {"s3"})]
    assert report.errors == ["ceph-a/backups: ConnectionError: ceph-a is away"]
