"""How a process serves its metrics. With `PROMETHEUS_MULTIPROC_DIR` set (several worker
processes on one host, or uvicorn's `--workers`), every process writes its samples there and
whichever process answers a scrape adds them all up; without it, each process serves its
own."""

from __future__ import annotations

import errno
import logging
import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
    start_http_server,
)

log = logging.getLogger(__name__)


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def registry() -> CollectorRegistry:
    """The samples of this process, or of all of this host's processes in multiprocess
    mode."""
    if multiprocess_dir() is None:
        return REGISTRY
    found = CollectorRegistry()
    multiprocess.MultiProcessCollector(found)  # type: ignore[no-untyped-call]
    return found


def render(*registries: CollectorRegistry) -> tuple[bytes, str]:
    """One exposition of several registries; the text format allows it as long as no family
    appears twice (the fleet's gauges are their own families)."""
    return b"".join(generate_latest(found) for found in registries), CONTENT_TYPE_LATEST


def serve(name: str, host: str, port: int) -> bool:
    """Serve /metrics on host:port from a thread of this process; False when another
    process of this host already does (multiprocess mode: it serves this one's samples
    too). Port 0 serves nothing."""
    if port == 0:
        return False
    try:
        start_http_server(port, addr=host, registry=registry())
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        if multiprocess_dir() is not None:
            log.info("%s: metrics of this host are served by another process on %s:%d",
                     name, host, port)
        else:
            # Metrics are not worth a stopped worker: it runs on, unseen by Prometheus.
            log.warning("%s: port %s:%d is taken; this process serves no metrics (several "
                        "on one host share a port with PROMETHEUS_MULTIPROC_DIR)",
                        name, host, port)
        return False
    log.info("%s: metrics on http://%s:%d/metrics", name, host, port)
    return True

