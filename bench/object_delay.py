"""A delay line between the bench's S3 client and RGW: `bench/latency/proxy.py` on a port of
its own in front of RGW's, every byte handed on `delay` seconds after it arrived, in either
direction (a request and its answer pay one round trip, 2 x delay, on top of RGW's time;
requests on other connections overlap as on a real network). The bench's Bucket is pointed
at the proxy's port: the SigV4 signature covers the Host header, which the proxy passes on
unchanged, and RGW (`--rgw-dns-name=127.0.0.1`) takes any port of 127.0.0.1 as path-style
addressing. Each connection holds at most `window` unacknowledged bytes over its round
trip (TCP's window: this machine's, `line.tcp_window()`, unless told), so one stream
carries at most window / (2 x delay) a second, as across a real link of that latency.
What the proxy does not model: a connection's set-up costs no round trip, slow start, and
bandwidth is what two cores give a Python process (~1 CPU-s per GiB carried)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from bench.latency import line
from tests.support.redis_server import free_port


@contextmanager
def s3_delay_line(endpoint: str, delay: float, window: int) -> Iterator[str]:
    """The endpoint (`http://127.0.0.1:<port>`) that reaches `endpoint`, an RGW on
    loopback, through a delay line of `delay` seconds each way and TCP's `window` (bytes;
    0 for none), while the context lasts."""
    upstream = urlsplit(endpoint)
    if upstream.hostname != "127.0.0.1" or upstream.port is None:
        raise ValueError(f"the delay line forwards to 127.0.0.1:<port> only, not {endpoint}")
    port = free_port()
    proxy = line.start_proxy(delay, {upstream.port: port}, window)
    try:
        yield f"{upstream.scheme}://127.0.0.1:{port}"
    finally:
        proxy.terminate()
        proxy.wait(10)

