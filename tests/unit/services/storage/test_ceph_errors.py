"""What librados and librbd raise leaves the storage layer as one of Cairn's errors: a
code and a message a tenant can act on, the API's status with it, and no host, path or
object name."""

from __future__ import annotations

import errno

import pytest
import rados
import rbd

from services.errors import StorageError, StorageFull, StorageTimeout, StorageUnavailable
from services.settings import Settings
from services.storage.ceph import CephClusters, storage_error


@pytest.mark.parametrize(("raised", "kind", "status", "code"), [
    (rbd.Timeout("osd op timed out on 10.0.0.7:6800", errno=errno.ETIMEDOUT), StorageTimeout,
     503, "storage_timeout"),
    (rados.Error("[errno 110] timed out on mon.a", errno=-errno.ETIMEDOUT), StorageTimeout,
     503, "storage_timeout"),
    (rbd.ConnectionShutdown("blocklisted", errno=errno.ESHUTDOWN), StorageUnavailable, 503,
     "storage_unavailable"),
    (rbd.NoSpace("write to rbd_data.1234 failed", errno=errno.ENOSPC), StorageFull, 507,
     "storage_full"),
    (rados.Error("quota on pool backups", errno=-errno.EDQUOT), StorageFull, 507,
     "storage_full"),
    (rbd.IOError("EIO on rbd_data.abcd.0000000000000003", errno=errno.EIO), StorageError, 502,
     "storage_error"),
])
def test_each_ceph_failure_becomes_an_error_a_tenant_can_read(
        raised: rados.Error | rbd.Error, kind: type[Exception], status: int,
        code: str) -> None:
    error = storage_error(raised, cluster="ceph-a", pool="backups",
                          timeout_seconds=30)
    assert type(error) is kind
    assert (error.status_code, error.code) == (status, code)
    assert "try again" in error.message
    for leak in ("10.0.0.7", "mon.a", "rbd_data", "blocklisted"):
        assert leak not in error.message


def test_an_image_used_after_its_ioctx_with_still_raises_cairns_errors() -> None:
    # A restore point's reader keeps its image open past the `with` that opened it; each
    # of its reads passes the same boundary.
    settings = Settings(auth_strategy="noauth", environment="development",
                        clusters={"ceph-a": {"conf": "/etc/ceph/ceph.conf"}})
    clusters = CephClusters(settings)
    handle = object()
    with pytest.raises(StorageError, match="the Ceph cluster failed an operation") as raised, \
            clusters.boundary("ceph-a", "backups", handle):  # type: ignore[arg-type]
        raise rbd.IOError("EIO on rbd_data.abcd.0000000000000003", errno=errno.EIO)
    assert "rbd_data" not in raised.value.message
    with pytest.raises(StorageTimeout), \
            clusters.boundary("ceph-a", "backups", handle):  # type: ignore[arg-type]
        raise rbd.Timeout("osd op timed out", errno=errno.ETIMEDOUT)
