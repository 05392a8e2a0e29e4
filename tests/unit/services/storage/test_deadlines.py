"""The process's request deadlines: a socket is shut when its deadline passes, never once
its request has ended, one given after its deadline passed is shut at once, one that cannot
be shut stops no other deadline, and requests that end in time leave nothing behind."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from services.storage import deadlines
from services.storage.deadlines import Watchdog


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
    deadline = watchdog.watch(started + 0.1, ours)
    assert ours.recv(1) == b""  # shut: the read ends as if the peer had closed
    assert 0.09 < time.monotonic() - started < 1.0
    assert watchdog.end(deadline)


def test_a_request_ended_in_time_keeps_its_socket(
        pair: tuple[socket.socket, socket.socket]) -> None:
    watchdog = Watchdog()
    ours, theirs = pair
    deadline = watchdog.watch(time.monotonic() + 0.05, ours)
    assert not watchdog.end(deadline)
    time.sleep(0.1)
    theirs.sendall(b"x")
    ours.settimeout(1)
    assert ours.recv(1) == b"x"
    assert not watchdog.end(deadline)  # idempotent


def test_requests_ended_in_time_leave_nothing_behind() -> None:
    watchdog = Watchdog()
    for _ in range(20_000):
        watchdog.end(watchdog.watch(time.monotonic() + 60))
    assert len(watchdog._heap) <= 2 * Watchdog._COMPACT_AFTER + 2


def test_a_socket_armed_after_its_deadline_passed_is_shut_at_once(
        pair: tuple[socket.socket, socket.socket]) -> None:
    """A request that had no socket yet when its deadline passed (still waiting for a name
    or a connection) gets none it could wait on."""
    watchdog = Watchdog()
    ours, _ = pair
    deadline = watchdog.watch(time.monotonic() + 0.02)
    time.sleep(0.1)
    assert not watchdog.arm(deadline, ours)
    ours.settimeout(1)
    assert ours.recv(1) == b""
    assert watchdog.end(deadline)


def test_the_socket_shut_is_the_last_one_armed(
        pair: tuple[socket.socket, socket.socket]) -> None:
    watchdog = Watchdog()
    ours, _ = pair
    first, first_peer = socket.socketpair()
    try:
        started = time.monotonic()
        deadline = watchdog.watch(started + 0.1, first)
        assert watchdog.arm(deadline, ours)
        ours.settimeout(1)
        assert ours.recv(1) == b""
        assert 0.09 < time.monotonic() - started < 1.0
        first_peer.sendall(b"x")
        first.settimeout(1)
        assert first.recv(1) == b"x"  # the first (an address given up on) is left alone
    finally:
        first.close()
        first_peer.close()


def test_a_socket_that_cannot_be_shut_stops_no_later_deadline(
        pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The process has one thread for every deadline: were it to die, none would pass
    again, and nothing would say so."""
    watchdog = Watchdog()
    ours, _ = pair
    cursed, cursed_peer = socket.socketpair()
    shut = deadlines._shut

    def shut_or_fail(sock: socket.socket) -> None:
        if sock is cursed:
            raise RuntimeError("as the test said")
        shut(sock)

    monkeypatch.setattr(deadlines, "_shut", shut_or_fail)
    try:
        started = time.monotonic()
        watchdog.watch(started + 0.02, cursed)
        deadline = watchdog.watch(started + 0.1, ours)
        ours.settimeout(1)
        assert ours.recv(1) == b""
        assert 0.09 < time.monotonic() - started < 1.0
        assert watchdog.end(deadline)
        assert "could not be shut at its deadline" in caplog.text
    finally:
        cursed.close()
        cursed_peer.close()
