"""The delay line between Ceph clients and OSDs, for benchmarks: `proxy.py` forwards each
OSD's port with a fixed delay each way, and `redirect.c`, preloaded into the processes,
sends their connect()s to the proxy instead of the OSD while CAIRN_REDIRECT names the
ports (read at each connect(), so one process can hold connections of both kinds). Child
processes started while the line is up inherit both and go through it too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROXY_PORT_BASE = 31900
_MIB = 1 << 20


def ensure_redirect_preloaded(state: Path) -> None:
    """Re-runs the benchmark with the connect() redirect preloaded (built into `state`): it
    must be in the process before librados starts its threads. Without CAIRN_REDIRECT set
    it changes nothing."""
    lib = state / "redirect.so"
    if lib.name in os.environ.get("LD_PRELOAD", ""):
        return
    state.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib),
                    str(HERE / "redirect.c"), "-ldl"], check=True)
    preload = " ".join(filter(None, [str(lib), os.environ.get("LD_PRELOAD")]))
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "LD_PRELOAD": preload})


def osd_ports(conf: str) -> list[int]:
    dump = json.loads(subprocess.run(["ceph", "-c", conf, "osd", "dump", "-f", "json"],
                                     check=True, capture_output=True, text=True).stdout)
    return [int(a["addr"].rsplit(":", 1)[1]) for osd in dump["osds"]
            for a in osd["public_addrs"]["addrvec"]]


def start_proxy(delay: float, pairs: dict[int, int], window: int = 0
                ) -> subprocess.Popen[str]:
    """proxy.py forwarding each port of `pairs` (to: from) with `delay` each way, and TCP's
    `window` over the round trip when not 0, once it says it is ready."""
    proxy = subprocess.Popen([sys.executable, str(HERE / "proxy.py"), "--delay", str(delay),
                              "--window", str(window),
                              *(f"{p}={q}" for p, q in pairs.items())],
                             stdout=subprocess.PIPE, text=True,
                             # Keep its 256 KiB buffers in the heap: mapping and faulting
                             # in fresh pages for each one cost a third of its CPU.
                             env={**os.environ, "MALLOC_MMAP_THRESHOLD_": str(64 * _MIB),
                                  "MALLOC_TRIM_THRESHOLD_": str(256 * _MIB)})
    assert proxy.stdout is not None
    if proxy.stdout.readline().strip() != "ready":
        proxy.kill()
        raise RuntimeError("the delay proxy did not start")
    return proxy


def tcp_window() -> int:
    """The most unacknowledged bytes this machine's TCP lets one connection hold: its
    largest send buffer or its largest receive buffer, whichever is smaller
    (net.ipv4.tcp_wmem and tcp_rmem, third fields). Across a real link of round trip RTT,
    one connection carries at most this / RTT bytes a second."""
    def largest(name: str) -> int:
        return int(Path(f"/proc/sys/net/ipv4/{name}").read_text().split()[2])
    return min(largest("tcp_wmem"), largest("tcp_rmem"))


@contextmanager
def injected_latency(delay: float, confs: list[str]) -> Iterator[subprocess.Popen[str]]:
    """While active, new Ceph client connections to the OSDs of these clusters (this
    process's, and those of processes started meanwhile) pass through a delay line of
    `delay` seconds each way."""
    ports = [p for conf in confs for p in osd_ports(conf)]
    pairs = {p: PROXY_PORT_BASE + n for n, p in enumerate(ports)}
    proxy = start_proxy(delay, pairs)
    try:
        os.environ["CAIRN_REDIRECT"] = ",".join(f"{p}={q}" for p, q in pairs.items())
        yield proxy
    finally:
        os.environ.pop("CAIRN_REDIRECT", None)
        proxy.terminate()
        proxy.wait(10)
