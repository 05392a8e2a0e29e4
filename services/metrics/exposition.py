"""How a process serves its metrics. With `PROMETHEUS_MULTIPROC_DIR` set (several worker
processes on one host, or uvicorn's `--workers`), every process writes its samples there and
whichever process answers a scrape adds them all up; without it, each process serves its
own."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

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


class Combined(Collector):
    """This host's samples (`registry()`) and further registries (cairn-api's fleet
    gauges) in one exposition; each is read anew at every scrape."""

    def __init__(self, *more: Collector) -> None:
        self.more = more
        self.own = registry()  # multiprocess mode: reads the directory at every collect()

    def collect(self) -> Iterable[Metric]:
        yield from self.own.collect()
        for found in self.more:
            yield from found.collect()


def serve(name: str, host: str, port: int, *more: Collector) -> bool:
    """Serve /metrics on host:port from a thread of this process, with the samples of
    `registry()` and of `more`; False when another process of this host already does
    (multiprocess mode: it serves this one's samples too). Port 0 serves nothing."""
    if port == 0:
        return False
    try:
        start_http_server(port, addr=host, registry=Combined(*more) if more else registry())
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

