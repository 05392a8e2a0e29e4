"""Object targets in the settings: one namespace with the RBD targets, the operator's key
read strictly from its file, and the window bounded by the connections."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from services.errors import StorageUnavailable, UnknownTarget
from services.records.restore_points import RestorePoint
from services.restore_points.preconditions import require_target
from services.settings import (
    Settings,
    is_object_target,
    operator_key,
    resolve_target,
    target_job_limit,
    target_names,
)

S3 = {"endpoint": "http://127.0.0.1:1", "bucket": "b", "credentials_file": "/nonexistent"}
CLUSTERS = {"ceph-a": {"conf": "/etc/ceph/ceph.conf"}}


def _settings(**values: object) -> Settings:
    return Settings(auth_strategy="noauth", environment="development",
                    **values)  # type: ignore[arg-type]


def test_targets_of_both_kinds_resolve_and_an_unknown_one_lists_them() -> None:
    settings = _settings(clusters=CLUSTERS,
                         backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"}},
                         object_targets={"s3": {**S3, "max_jobs": 2}},
                         default_backup_target="s3")
    assert target_names(settings) == ["local", "s3"]
    assert resolve_target(settings, None) == "s3"
    assert is_object_target(settings, "s3")
    assert not is_object_target(settings, "local")
    assert target_job_limit(settings, "s3") == 2
    with pytest.raises(UnknownTarget, match="configured targets: local, s3"):
        resolve_target(settings, "elsewhere")


def test_a_name_used_by_both_kinds_is_refused() -> None:
    with pytest.raises(ValidationError, match="named both"):
        _settings(clusters=CLUSTERS,
                  backup_targets={"x": {"cluster": "ceph-a", "pool": "backups"}},
                  object_targets={"x": S3})


def test_more_uploads_in_flight_than_connections_is_refused() -> None:
    with pytest.raises(ValidationError, match="exceeds the target's connections"):
        _settings(object_targets={"s3": {**S3, "connections": 4, "uploads_in_flight": 8}})


def test_the_operator_key_is_64_hex_digits_or_nothing_is_read(tmp_path: Path) -> None:
    key = tmp_path / "key"
    assert operator_key(_settings()) is None
    key.write_text("ab" * 32 + "\n")
    assert operator_key(_settings(object_key_file=key)) == bytes([0xAB]) * 32
    for bad in ("ab" * 31, "zz" * 32, "ab" * 33, ""):
        key.write_text(bad)
        with pytest.raises(StorageUnavailable, match="64 hex digits"):
            operator_key(_settings(object_key_file=key))
    with pytest.raises(StorageUnavailable, match="cannot read"):
        operator_key(_settings(object_key_file=tmp_path / "missing"))


def test_a_restore_point_on_a_target_no_longer_configured_is_refused_with_the_reason() -> None:
    settings = _settings(clusters=CLUSTERS,
                         backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"}})
    kept = RestorePoint(id="rp-1", project_id="p", volume_id="v", target="local")
    require_target(settings, kept)
    dropped = RestorePoint(id="rp-2", project_id="p", volume_id="v", target="s3")
    with pytest.raises(StorageUnavailable, match="target 's3', which this service does not"):
        require_target(settings, dropped)
