"""The process's request deadlines: a socket is shut when its deadline passes, never once
its request has ended, and requests that end in time leave nothing behind."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from services.storage.deadlines import Watchdog


@dataclass
class _Conn:
    sock: socket.socket | None


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def test_a_read_blocked_past_its_deadline_ends_there(
        pair: tuple[socket.socket, socket.socket]) -> None:
    watchdog = Watchdog()
    ours, _ = pair
    ours.settimeout(5)
    started = time.monotonic()
    deadline = watchdog.watch(_Conn(ours), started + 0.1)
    assert ours.recv(1) == b""  # shut: the read ends as if the peer had closed
    assert 0.09 < time.monotonic() - started < 1.0
    assert watchdog.end(deadline)


def test_a_request_ended_in_time_keeps_its_socket(
        pair: tuple[socket.socket, socket.socket]) -> None:
    watchdog = Watchdog()
    ours, theirs = pair
    deadline = watchdog.watch(_Conn(ours), time.monotonic() + 0.05)
    assert not watchdog.end(deadline)
    time.sleep(0.1)
    theirs.sendall(b"x")
    ours.settimeout(1)
    assert ours.recv(1) == b"x"
    assert not watchdog.end(deadline)  # idempotent


def test_requests_ended_in_time_leave_nothing_behind() -> None:
    watchdog = Watchdog()
    conn = _Conn(None)
    for _ in range(20_000):
        watchdog.end(watchdog.watch(conn, time.monotonic() + 60))
    assert len(watchdog._heap) <= 2 * Watchdog._COMPACT_AFTER + 2
