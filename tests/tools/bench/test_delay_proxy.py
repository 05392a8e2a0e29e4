"""The benchmarks' delay line (bench/latency/proxy.py), on loopback: an answer pays a round
trip, and with a window one connection carries no more than window / round trip a second,
as across a real link. Without that bound one stream through the line was as fast as
loopback, and a single-stream anchor looked like a parallel one (issue 35's naive restore)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from bench.latency import line

DELAY = 0.05
MiB = 1 << 20
SIZE = 4 * MiB


@pytest.fixture
def source() -> Iterator[int]:
    """A loopback server that sends SIZE bytes to each connection once it reads one byte."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                if conn.recv(1):
                    conn.sendall(bytes(SIZE))

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def fetch(port: int) -> tuple[float, float]:
    """Seconds to the first byte of the answer, and to its end."""
    with socket.create_connection(("127.0.0.1", port)) as conn:
        started = time.monotonic()
        conn.sendall(b"x")
        received, first = 0, 0.0
        while chunk := conn.recv(1 << 20):
            first = first or time.monotonic() - started
            received += len(chunk)
        assert received == SIZE
        return first, time.monotonic() - started


def through_proxy(port: int, window: int) -> tuple[float, float]:
    listen = socket.create_server(("127.0.0.1", 0))
    listen_port = listen.getsockname()[1]
    listen.close()
    proxy = line.start_proxy(DELAY, {port: listen_port}, window)
    try:
        return fetch(listen_port)
    finally:
        proxy.terminate()
        proxy.wait(10)


def test_an_answer_pays_a_round_trip_and_a_window_bounds_one_connections_rate(
        source: int) -> None:
    first, unbounded = through_proxy(source, 0)
    assert first >= 2 * DELAY
    _, windowed = through_proxy(source, 512 << 10)
    # 512 KiB a round trip of 0.1 s is 5 MiB/s: 4 MiB take about 0.9 s, where the line
    # without a window carries them in about one round trip.
    assert windowed >= 0.7, windowed
    assert unbounded < windowed / 2, (unbounded, windowed)


def test_the_window_is_this_machines_tcp_buffers() -> None:
    def largest(name: str) -> int:
        with open(f"/proc/sys/net/ipv4/{name}") as values:
            return int(values.read().split()[2])
    assert line.tcp_window() == min(largest("tcp_wmem"), largest("tcp_rmem"))
