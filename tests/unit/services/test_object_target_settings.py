"""Object targets in the settings: one namespace with the RBD targets, the operator's key
read strictly from its file, and the window bounded by the connections. (Finding targets
by name, and refusing unknown ones, is the registry's: tests/unit/services/targets/.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from services.errors import StorageUnavailable
from services.settings import Settings, operator_key

S3 = {"endpoint": "http://127.0.0.1:1", "bucket": "b", "credentials_file": "/nonexistent"}
CLUSTERS = {"ceph-a": {"conf": "/etc/ceph/ceph.conf"}}


def _settings(**values: object) -> Settings:
    return Settings(auth_strategy="noauth", environment="development",
                    **values)  # type: ignore[arg-type]


def test_a_name_used_by_both_kinds_is_refused() -> None:
    with pytest.raises(ValidationError, match="named both"):
        _settings(clusters=CLUSTERS,
                  backup_targets={"x": {"cluster": "ceph-a", "pool": "backups"}},
                  object_targets={"x": S3})


def test_more_uploads_in_flight_than_connections_is_refused() -> None:
    with pytest.raises(ValidationError, match="exceeds the target's connections"):
        _settings(object_targets={"s3": {**S3, "connections": 4, "uploads_in_flight": 8}})


def test_more_downloads_in_flight_than_connections_is_refused_unless_by_default() -> None:
    with pytest.raises(ValidationError, match="downloads_in_flight 8 exceeds the target's"):
        _settings(object_targets={"s3": {**S3, "connections": 4, "uploads_in_flight": 4,
                                         "downloads_in_flight": 8}})
    # A target configured with few connections before the setting existed still starts.
    few = _settings(object_targets={"s3": {**S3, "connections": 4, "uploads_in_flight": 4}})
    assert few.object_targets["s3"].downloads_in_flight == 4
    assert _settings(object_targets={"s3": S3}).object_targets["s3"].downloads_in_flight == 16


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


@pytest.mark.parametrize(("first", "second"), [
    ({}, {}),  # one bucket, one prefix (the default "cairn")
    ({"prefix": "cairn"}, {"prefix": "cairn/inner"}),
    ({"prefix": "a/b/c"}, {"prefix": "a"}),
    ({"endpoint": "http://127.0.0.1:1"}, {"endpoint": "HTTP://127.0.0.1:1/"}),
    ({"endpoint": "https://s3.example.net"}, {"endpoint": "https://S3.example.net:443"}),
])
def test_two_object_targets_under_one_prefix_or_one_inside_the_other_are_refused(
        first: dict[str, str], second: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match=r"overlap in bucket 'b'.*each target needs a "
                                              r"prefix of its own"):
        _settings(object_targets={"a": {**S3, **first}, "b": {**S3, **second}})


@pytest.mark.parametrize("second", [
    {"prefix": "cairn-2"},  # a prefix that only starts with the other's name
    {"bucket": "other"},
    {"endpoint": "http://127.0.0.1:2"},
])
def test_object_targets_apart_in_prefix_bucket_or_endpoint_are_taken(
        second: dict[str, str]) -> None:
    assert len(_settings(object_targets={"a": S3, "b": {**S3, **second}}).object_targets) == 2
