"""Directory targets in the settings (`CAIRN_DIRECTORY_TARGETS`): read from the
environment as JSON like the other kinds, one namespace of names with them, an absolute
plain path each, and no two targets in one directory; each refusal says what to fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.settings import Settings

S3 = {"endpoint": "http://127.0.0.1:1", "bucket": "b", "credentials_file": "/nonexistent"}


def _settings(**values: object) -> Settings:
    return Settings(auth_strategy="noauth", environment="development",
                    **values)  # type: ignore[arg-type]


def test_directory_targets_are_read_from_the_environment_as_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_DIRECTORY_TARGETS", json.dumps(
        {"nfs": {"path": "/srv/cairn", "chunk_size_mib": 1, "uploads_in_flight": 4,
                 "max_jobs": 2}}))
    monkeypatch.setenv("CAIRN_DEFAULT_BACKUP_TARGET", "nfs")
    nfs = _settings().directory_targets["nfs"]
    assert (nfs.path, nfs.chunk_size_mib, nfs.uploads_in_flight, nfs.max_jobs) == (
        Path("/srv/cairn"), 1, 4, 2)


@pytest.mark.parametrize("path", ["backups", "./backups", "/srv/../etc", "/"])
def test_a_path_that_is_not_a_plain_absolute_directory_is_refused(path: str) -> None:
    with pytest.raises(ValidationError, match="must be an absolute path to a directory below "
                                              "the root"):
        _settings(directory_targets={"nfs": {"path": path}})


def test_a_name_used_by_two_kinds_is_refused_naming_both_settings() -> None:
    with pytest.raises(ValidationError, match="named both in CAIRN_OBJECT_TARGETS and in "
                                              "CAIRN_DIRECTORY_TARGETS"):
        _settings(object_targets={"x": S3}, directory_targets={"x": {"path": "/srv/x"}})
    with pytest.raises(ValidationError, match="named both in CAIRN_BACKUP_TARGETS and in "
                                              "CAIRN_DIRECTORY_TARGETS"):
        _settings(clusters={"ceph-a": {"conf": "/etc/ceph/ceph.conf"}},
                  backup_targets={"x": {"cluster": "ceph-a", "pool": "backups"}},
                  directory_targets={"x": {"path": "/srv/x"}})


@pytest.mark.parametrize("other", ["/srv/cairn", "/srv/cairn/inner", "/srv"])
def test_two_targets_in_one_directory_or_one_inside_the_other_are_refused(other: str) -> None:
    with pytest.raises(ValidationError, match="overlap: each target needs a directory of its "
                                              "own"):
        _settings(directory_targets={"a": {"path": "/srv/cairn"}, "b": {"path": other}})
    _settings(directory_targets={"a": {"path": "/srv/cairn"}, "b": {"path": "/srv/cairn-2"}})


def test_an_unknown_default_target_names_the_directory_targets_too() -> None:
    with pytest.raises(ValidationError, match=r"not a configured backup target \(\['nfs'\]\)"):
        _settings(directory_targets={"nfs": {"path": "/srv/x"}}, default_backup_target="gone")
