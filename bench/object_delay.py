"""A delay line between the bench's S3 client and RGW: `bench/latency/proxy.py` on a port of
its own in front of RGW's, every byte handed on `delay` seconds after it arrived, in either
direction (a request and its answer pay one round trip, 2 x delay, on top of RGW's time;
requests on other connections overlap as on a real network). The bench's Bucket is pointed
at the proxy's port: the SigV4 signature covers the Host header, which the proxy passes on
unchanged, and RGW (`--rgw-dns-name=127.0.0.1`) takes any port of 127.0.0.1 as path-style
addressing. What the proxy does not model: a connection's set-up costs no round trip, and
bandwidth is what two cores give a Python process (~1 CPU-s per GiB carried)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.redis_server import free_port

PROXY = Path(__file__).resolve().parent / "latency" / "proxy.py"
_MIB = 1 << 20


@contextmanager
def s3_delay_line(endpoint: str, delay: float) -> Iterator[str]:
    """The endpoint (`http://127.0.0.1:<port>`) that reaches `endpoint`, an RGW on
    loopback, through a delay line of `delay` seconds each way, while the context lasts."""
    upstream = urlsplit(endpoint)
    if upstream.hostname != "127.0.0.1" or upstream.port is None:
        raise ValueError(f"the delay line forwards to 127.0.0.1:<port> only, not {endpoint}")
    port = free_port()
    proxy = subprocess.Popen(
        [sys.executable, str(PROXY), "--delay", str(delay), f"{upstream.port}={port}"],
        stdout=subprocess.PIPE, text=True,
        # As bench/latency/line.py's: its 256 KiB buffers stay in the heap.
        env={**os.environ, "MALLOC_MMAP_THRESHOLD_": str(64 * _MIB),
             "MALLOC_TRIM_THRESHOLD_": str(256 * _MIB)})
    try:
        assert proxy.stdout is not None
        if proxy.stdout.readline().strip() != "ready":
            raise RuntimeError("the S3 delay proxy did not start")
        yield f"{upstream.scheme}://127.0.0.1:{port}"
    finally:
        proxy.terminate()
        proxy.wait(10)

