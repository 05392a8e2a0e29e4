"""What a worker process holds: settings, database, Ceph connections. Built on first use
in each process (after Celery's fork), never at import."""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass

from services.clock import Clock, clock_for
from services.db import Database
from services.limits.leases import Leases
from services.openstack.cinder import CinderGateway, gateway_for
from services.settings import Settings, get_settings
from services.storage.ceph import CephClusters


@dataclass
class Runtime:
    settings: Settings
    db: Database
    clusters: CephClusters
    name: str
    leases: Leases
    clock: Clock
    cinder: CinderGateway | None = None


_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    global _runtime
    with _lock:
        if _runtime is None or _runtime.name != _worker_name():
            settings = get_settings()
            _runtime = Runtime(settings, Database(settings.database_url),
                               CephClusters(settings), _worker_name(),
                               Leases.from_settings(settings), clock_for(settings.clock_file),
                               gateway_for(settings.keystone, settings.cinder))
        return _runtime


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
