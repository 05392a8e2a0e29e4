"""A directory target as the scheduler sees it, on tmp_path: the probe finds the directory
and the data key Cairn recorded (a scheduler where the share is not mounted sees an empty
directory, which is not where the data is), and the orphan scan removes a deleted restore
point's manifest and the temporary files of killed writes, after the grace only."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.db import Database
from services.errors import TargetKeyMissing, TargetNeverWritten
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.settings import Settings
from services.status import RestorePointStatus
from services.storage import data_keys
from services.storage.object_layout import chunk_key, manifest_key
from services.targets import directory, get
from services.targets.scans import OrphanScan, Report

OPERATOR_KEY = bytes(range(32))


def _target(path: Path) -> directory.DirectoryTarget:
    settings = Settings(auth_strategy="noauth", environment="development",
                        directory_targets={"nfs": {"path": str(path)}})
    target = get(settings, "nfs")
    assert isinstance(target, directory.DirectoryTarget)
    return target


def test_the_probe_wants_the_directory_and_the_key_recorded_for_it(
        db: Database, tmp_path: Path) -> None:
    share = tmp_path / "share"
    target = _target(share)
    assert target.probe(None, db) is False  # type: ignore[arg-type]  # not mounted
    share.write_bytes(b"")
    assert target.probe(None, db) is False  # type: ignore[arg-type]  # not a directory
    share.unlink()
    share.mkdir()
    assert target.probe(None, db) is True  # type: ignore[arg-type]  # new: nothing yet
    data_keys.opened(db, target.backend(), "nfs", OPERATOR_KEY, create=True)
    assert target.probe(None, db) is True  # type: ignore[arg-type]
    # The share is unmounted: the mount point is an empty directory, not the target's.
    share.rename(tmp_path / "unmounted")
    share.mkdir()
    assert target.probe(None, db) is False  # type: ignore[arg-type]
    (share / "keys").symlink_to(tmp_path / "unmounted" / "keys")  # nor a link to its key
    assert target.probe(None, db) is False  # type: ignore[arg-type]


def test_a_directory_holding_chunks_but_no_key_is_down(db: Database, tmp_path: Path) -> None:
    target = _target(tmp_path)
    target.backend().put(chunk_key("p", "ab" * 32), b"sealed")
    assert target.probe(None, db) is False  # type: ignore[arg-type]


def test_what_is_wrong_with_its_data_key_is_said_of_its_directory_not_a_bucket(
        db: Database, tmp_path: Path) -> None:
    backend = _target(tmp_path).backend()
    with pytest.raises(TargetNeverWritten) as never:
        data_keys.opened(db, backend, "nfs", OPERATOR_KEY)
    backend.put(chunk_key("p", "ab" * 32), b"sealed")
    with pytest.raises(TargetKeyMissing) as missing:
        data_keys.opened(db, backend, "nfs", OPERATOR_KEY, create=True)
    for said in (never.value.message, missing.value.message):
        assert "directory" in said, said
        assert "bucket" not in said, said
        assert "prefix" not in said, said
    assert "point the target at the directory it was made with" in missing.value.message


def test_the_orphan_scan_removes_a_deleted_points_manifest_and_old_temporary_files(
        db: Database, tmp_path: Path) -> None:
    target = _target(tmp_path)
    backend = target.backend()
    data_keys.opened(db, backend, "nfs", OPERATOR_KEY, create=True)
    with db.session() as session:
        session.add(Volume(id="v", project_id="p", cluster="ceph-a", pool="volumes",
                           image="v"))
        session.flush()
        deleted = RestorePoint(project_id="p", volume_id="v", target="nfs",
                               status=RestorePointStatus.DELETED)
        kept = RestorePoint(project_id="p", volume_id="v", target="nfs",
                            status=RestorePointStatus.AVAILABLE,
                            completed_at=datetime.now(UTC) - timedelta(days=1))
        session.add_all([deleted, kept])
        session.flush()
        deleted_id, kept_id = deleted.id, kept.id
    for rp_id in (deleted_id, kept_id):
        backend.put(manifest_key("p", rp_id), b"sealed manifest")
    (tmp_path / "chunks" / "p" / "ab").mkdir(parents=True)
    old = tmp_path / "chunks" / "p" / "ab" / (".tmp." + "1" * 32)
    new = tmp_path / "manifests" / "p" / (".tmp." + "2" * 32)
    old.write_bytes(b"half a chunk")
    new.write_bytes(b"a write under way")
    later = datetime.now(UTC) + timedelta(minutes=10)
    os.utime(new, (later.timestamp(), later.timestamp()))  # younger than the grace

    report = Report(applied=True)
    target.scan_orphans(OrphanScan(db, None, report, True,  # type: ignore[arg-type]
                                   datetime.now(UTC) + timedelta(minutes=1), 60.0), {"nfs"})
    assert sorted((f.action, f.what, f.restore_point_id) for f in report.findings) == [
        ("remove", "manifest", deleted_id), ("remove", "temporary file", None)]
    assert report.errors == []
    assert backend.size(manifest_key("p", deleted_id)) is None
    assert backend.size(manifest_key("p", kept_id)) is not None
    assert not old.exists()
    assert new.exists()
