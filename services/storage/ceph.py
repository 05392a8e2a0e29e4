"""Connections to the configured Ceph clusters: one Rados handle per cluster per process,
opened on first use (never at import: a handle must not cross a fork).

Every operation has a deadline (`ceph_op_timeout_seconds`), and a handle the cluster shut
out (blocklisted, e.g. when another client broke its lock) is dropped: the next use
connects anew, so the process does not stay cut off until it restarts."""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import rados
import rbd

from services.errors import (
    CairnError,
    NotFound,
    StorageError,
    StorageFull,
    StorageTimeout,
    StorageUnavailable,
    UnknownCluster,
)
from services.settings import Settings

log = logging.getLogger(__name__)

_SHUT_OUT = (errno.ESHUTDOWN, errno.ENOTCONN, errno.EBADF)
"""What librbd and librados report once the cluster blocklisted the client (ESHUTDOWN, as
EBLOCKLISTED) or its session is gone."""


def _errno(exc: BaseException) -> int | None:
    if not isinstance(exc, rados.Error | rbd.Error):
        return None
    code = getattr(exc, "errno", None)
    return abs(code) if isinstance(code, int) else None


def is_shut_out(exc: BaseException) -> bool:
    return _errno(exc) in _SHUT_OUT


def is_timeout(exc: BaseException) -> bool:
    return _errno(exc) == errno.ETIMEDOUT


def storage_error(exc: rados.Error | rbd.Error, *, cluster: str, pool: str,
                  timeout_seconds: float) -> CairnError:
    """Cairn's error for what librados or librbd raised, in words a tenant can act on."""
    if is_timeout(exc):
        return StorageTimeout(
            f"Ceph cluster {cluster!r} did not answer within {timeout_seconds:g} s (pool "
            f"{pool!r}); it may be paused, full or partitioned; try again later",
            cluster=cluster)
    if is_shut_out(exc):
        return StorageUnavailable(f"the connection to Ceph cluster {cluster!r} was lost; "
                                  "try again", cluster=cluster)
    if _errno(exc) in (errno.ENOSPC, errno.EDQUOT):
        return StorageFull(f"the Ceph pool {pool!r} is full or over its quota; ask the "
                           "operator to add capacity, then try again", cluster=cluster)
    return StorageError("the Ceph cluster failed an operation; try again, and ask the "
                        "operator if it fails again (their logs have the details)",
                        cluster=cluster)


class CephClusters:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._handles: dict[str, rados.Rados] = {}
        self._lock = threading.Lock()
        for name, cluster in settings.clusters.items():
            if cluster.client == "client.admin":
                # Cairn needs rbd caps on its pools, not the keys to the whole cluster.
                log.warning("Ceph cluster %r: Cairn connects as client.admin; in production "
                            "give it a client of its own (caps: mon 'profile rbd', osd "
                            "'profile rbd pool=...') (docs/security.md)", name)

    def names(self) -> list[str]:
        return sorted(self._settings.clusters)

    def check_known(self, cluster: str, *, field: str) -> None:
        if cluster not in self._settings.clusters:
            raise UnknownCluster(
                f"{field} names cluster {cluster!r}, which Cairn does not know; "
                f"known clusters: {', '.join(self.names()) or 'none'}",
                field=field,
            )

    def handle(self, cluster: str) -> rados.Rados:
        with self._lock:
            handle = self._handles.get(cluster)
            if handle is not None:
                return handle
            self.check_known(cluster, field="cluster")
            cfg = self._settings.clusters[cluster]
            timeout = str(self._settings.ceph_connect_timeout_seconds)
            op_timeout = str(self._settings.ceph_op_timeout_seconds)
            conf = {"client_mount_timeout": timeout, "rados_mon_op_timeout": op_timeout,
                    "rados_osd_op_timeout": op_timeout,
                    # The copy engine's aio writes then send the bytes object's memory as
                    # is instead of copying each 4 MiB buffer (safe: bytes are immutable,
                    # which is the "unstable writes" risk the option guards against).
                    "rbd_disable_zero_copy_writes": "false",
                    # Instant restores clone backup snapshots: format 2 needs no snapshot
                    # protection and lets a clone live in another pool (the volumes pool).
                    "rbd_default_clone_format": "2"}
            if cfg.keyring is not None:
                conf["keyring"] = str(cfg.keyring)
            handle = rados.Rados(conffile=str(cfg.conf), name=cfg.client, conf=conf)
            try:
                handle.connect(timeout=self._settings.ceph_connect_timeout_seconds)
            except rados.Error as exc:
                handle.shutdown()
                # The detail (monitor addresses, the conf path) is for the operator's log.
                log.error("Ceph cluster %r is unreachable (%s); check that its monitors in "
                          "%s are up", cluster, exc, cfg.conf)
                raise StorageUnavailable(
                    f"Ceph cluster {cluster!r} is unreachable; try again later") from None
            self._handles[cluster] = handle
            return handle

    @contextmanager
    def ioctx(self, cluster: str, pool: str) -> Iterator[rados.Ioctx]:
        handle = self.handle(cluster)
        try:
            ioctx = handle.open_ioctx(pool)
        except rados.ObjectNotFound:
            raise NotFound(f"pool {pool!r} does not exist on cluster {cluster!r}",
                           cluster=cluster, pool=pool) from None
        try:
            with self.boundary(cluster, pool, handle):
                yield ioctx
        finally:
            ioctx.close()

    @contextmanager
    def boundary(self, cluster: str, pool: str, handle: rados.Rados) -> Iterator[None]:
        """Where librbd's and librados' errors leave as Cairn's, whose messages a tenant
        may read (the raw one, with hosts and object names, goes to the log). `ioctx`
        keeps it for the work inside its `with`; an image that outlives that `with` (a
        restore point's reader) keeps it around each call. `handle`: the cluster's handle
        the work uses, dropped if the cluster shut it out."""
        try:
            yield
        except (rados.Error, rbd.Error) as exc:
            raise self._storage_error(exc, cluster, pool, handle) from exc

    def pool_exists(self, cluster: str, pool: str) -> bool:
        handle = self.handle(cluster)
        try:
            return bool(handle.pool_exists(pool))
        except rados.Error as exc:
            raise self._storage_error(exc, cluster, pool, handle) from exc

    def _storage_error(self, exc: rados.Error | rbd.Error, cluster: str, pool: str,
                       handle: rados.Rados) -> CairnError:
        log.warning("Ceph cluster %r, pool %r: %s: %s", cluster, pool, type(exc).__name__, exc)
        if is_shut_out(exc):
            self.forget(cluster, handle)
        return storage_error(exc, cluster=cluster, pool=pool,
                             timeout_seconds=self._settings.ceph_op_timeout_seconds)

    def forget(self, cluster: str, handle: rados.Rados) -> None:
        """Drop `handle` (shut out by the cluster): the next use of `cluster` connects anew.
        Jobs still holding it fail on their own and retry on the new one."""
        with self._lock:
            if self._handles.get(cluster) is handle:
                del self._handles[cluster]
                log.warning("Ceph cluster %r shut this client out (blocklisted?); the next "
                            "use reconnects", cluster)

    def close(self) -> None:
        with self._lock:
            for handle in self._handles.values():
                handle.shutdown()
            self._handles.clear()
