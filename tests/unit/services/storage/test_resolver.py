"""One endpoint's name servers cannot hold another endpoint's lookups: a name that never
answers runs one lookup at a time, which its requests share, and is asked again only after
its failure has been given for a while."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from services.storage import resolver
from services.storage.resolver import Resolver

GOOD = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.1", 443))]


@pytest.fixture
def hostile(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, list[str]]]:
    """`getaddrinfo` whose answers for s3.hostile.test wait for the event and then fail
    (the system resolver giving up); `looked_up` gets every name asked."""
    released = threading.Event()
    looked_up: list[str] = []

    def getaddrinfo(host: str, *_args: object, **_kwargs: object) -> object:
        looked_up.append(host)
        if host == "s3.hostile.test":
            released.wait(2)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return GOOD

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield released, looked_up
    released.set()


def test_slow_lookups_of_one_name_do_not_delay_another_name(
        hostile: tuple[threading.Event, list[str]]) -> None:
    """Requests to the hostile target give up on its name one after another; the good
    target's new connection still has its addresses at once."""
    _released, looked_up = hostile
    lookups = Resolver()
    for _ in range(8):
        with pytest.raises(TimeoutError):
            lookups.addresses("s3.hostile.test", 443, time.monotonic() + 0.02)
    started = time.monotonic()
    assert lookups.addresses("s3.good.test", 443, time.monotonic() + 0.5) == GOOD
    assert time.monotonic() - started < 0.1
    assert looked_up == ["s3.hostile.test", "s3.good.test"]  # one lookup, shared


def test_a_failed_lookup_is_given_again_without_asking_again(
        hostile: tuple[threading.Event, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    released, looked_up = hostile
    lookups = Resolver()
    with pytest.raises(TimeoutError):
        lookups.addresses("s3.hostile.test", 443, time.monotonic() + 0.02)
    released.set()
    for _ in range(3):
        with pytest.raises(socket.gaierror):
            lookups.addresses("s3.hostile.test", 443, time.monotonic() + 0.5)
    assert looked_up == ["s3.hostile.test"]
    monkeypatch.setattr(resolver, "FAILURE_SECONDS", 0.0)
    with pytest.raises(socket.gaierror):
        lookups.addresses("s3.hostile.test", 443, time.monotonic() + 0.5)
    assert looked_up == ["s3.hostile.test"] * 2


def test_names_past_the_process_cap_wait_within_their_deadline(
        hostile: tuple[threading.Event, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """LOOKUPS names stuck at once: a new name waits for one of them until its deadline,
    and gets its lookup as soon as one ends."""
    released, _looked_up = hostile
    monkeypatch.setattr(resolver, "LOOKUPS", 1)
    lookups = Resolver()
    with pytest.raises(TimeoutError):
        lookups.addresses("s3.hostile.test", 443, time.monotonic() + 0.02)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        lookups.addresses("s3.good.test", 443, time.monotonic() + 0.05)
    assert 0.04 < time.monotonic() - started < 0.2
    threading.Timer(0.05, released.set).start()
    assert lookups.addresses("s3.good.test", 443, time.monotonic() + 1.0) == GOOD
