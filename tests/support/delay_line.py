"""The project's delay line (bench/latency/: `proxy.py` and the `redirect.c` connect() shim)
between a Cairn process and servers of the local stack: every connection that process opens
to one of the servers' loopback ports goes through a proxy that hands each byte on `delay`
seconds later, each way. The servers know nothing of it; other processes reach them as
always. Stopping the line makes the servers unreachable for that process alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.redis_server import free_port
from tests.support.stack import REPO

LATENCY = REPO / "bench" / "latency"


@dataclass
class DelayLine:
    env: dict[str, str]
    """For the process to start behind the line: LD_PRELOAD and CAIRN_REDIRECT."""
    proxy: subprocess.Popen[str]

    def cut(self) -> None:
        """The servers become unreachable for the process behind the line (its connections
        are refused), as when they are down."""
        if self.proxy.poll() is None:
            self.proxy.terminate()
            self.proxy.wait(10)


def redirect_library(directory: Path) -> Path:
    library = directory / "redirect.so"
    if not library.exists():
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(library),
                        str(LATENCY / "redirect.c"), "-ldl"], check=True)
    return library


@contextmanager
def delay_line(ports: list[int], delay: float, directory: Path) -> Iterator[DelayLine]:
    """A line in front of these loopback ports, for a process started with `line.env`."""
    pairs: Mapping[int, int] = {port: free_port() for port in ports}
    proxy = subprocess.Popen(
        [sys.executable, str(LATENCY / "proxy.py"), "--delay", str(delay),
         *(f"{port}={listen}" for port, listen in pairs.items())],
        stdout=subprocess.PIPE, text=True, env={**os.environ})
    line = DelayLine({"LD_PRELOAD": str(redirect_library(directory)),
                      "CAIRN_REDIRECT": ",".join(f"{p}={q}" for p, q in pairs.items())},
                     proxy)
    try:
        assert proxy.stdout is not None
        if proxy.stdout.readline().strip() != "ready":
            raise RuntimeError("the delay line's proxy did not start")
        yield line
    finally:
        line.cut()
