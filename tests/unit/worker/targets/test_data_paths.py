"""The worker's half of each kind of target: one data path for every kind the domain's
registry knows, found by the target, and a name the service does not configure refused
as the domain refuses it."""

from __future__ import annotations

import pytest

from services import targets
from services.errors import TargetNotConfigured
from services.settings import Settings
from worker import targets as data_paths
from worker.targets.object_store import ObjectStorePath
from worker.targets.rbd_pool import RbdPoolPath

S3 = {"endpoint": "http://127.0.0.1:1", "bucket": "b", "credentials_file": "/nonexistent"}
SETTINGS = Settings(auth_strategy="noauth", environment="development",
                    clusters={"ceph-a": {"conf": "/etc/ceph/ceph.conf"}},
                    backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"}},
                    object_targets={"s3": S3},
                    directory_targets={"nfs": {"path": "/srv/cairn-nfs"}})


def test_every_kind_of_the_registry_has_a_data_path_and_no_other() -> None:
    assert data_paths.kinds() == targets.kinds()


def test_each_target_gets_the_data_path_of_its_kind() -> None:
    assert isinstance(data_paths.data_path_of(SETTINGS, "local"), RbdPoolPath)
    assert isinstance(data_paths.data_path_of(SETTINGS, "s3"), ObjectStorePath)
    # The chunk format's data path, whichever backend keeps the chunks.
    assert isinstance(data_paths.data_path_of(SETTINGS, "nfs"), ObjectStorePath)
    with pytest.raises(TargetNotConfigured, match="target 'gone' is not configured"):
        data_paths.data_path_of(SETTINGS, "gone")
