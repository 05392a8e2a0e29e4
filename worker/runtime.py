"""What a worker process holds: settings, database, Ceph connections. Built on first use
in each process (after Celery's fork), never at import."""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass, field

from services.clock import Clock, clock_for
from services.db import Database
from services.dispatch import Dispatcher, make_celery
from services.limits.leases import Leases
from services.openstack.cinder_gateway import CinderGateway, gateway_for
from services.scheduler.admission import Admission
from services.settings import Settings, get_settings
from services.storage.ceph import CephClusters
from worker.managers.limits_watch import LimitsWatch


@dataclass
class Runtime:
    settings: Settings
    db: Database
    clusters: CephClusters
    name: str
    leases: Leases
    clock: Clock
    cinder: CinderGateway | None = None
    admission: Admission | None = None
    """Starts the next queued jobs when one of this worker's jobs frees its slots."""
    limits: LimitsWatch = field(init=False)
    """Reads the QoS limits and cancel requests of all the process's running jobs."""

    def __post_init__(self) -> None:
        self.limits = LimitsWatch(self.db)


_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    global _runtime
    with _lock:
        if _runtime is None or _runtime.name != _worker_name():
            settings = get_settings()
            # Each running job holds up to two sessions at once (its own, and its side
            # by side steps' or heartbeat's), plus the limits watch: with a smaller pool
            # every session past it opened a new PostgreSQL backend (a fork and an
            # authentication) and closed it again, a job's poll after another.
            db = Database(settings.database_url,
                          pool_size=2 * settings.worker_concurrency + 2)
            leases = Leases.from_settings(settings)
            dispatcher = Dispatcher(make_celery(settings.redis_url))
            _runtime = Runtime(settings, db, CephClusters(settings), _worker_name(), leases,
                               clock_for(settings.clock_file),
                               gateway_for(settings.keystone, settings.cinder),
                               Admission(db, leases, dispatcher, settings))
        return _runtime


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
