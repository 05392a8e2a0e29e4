"""The addresses of an endpoint's name, looked up within a request's deadline.

`getaddrinfo` cannot be interrupted, and its only bound is the system resolver's (resolv.conf's
timeout x attempts, for each name server: 10 s and more by default); whoever serves the
endpoint's domain, the bucket holder as often as not, decides how long it answers. So each
lookup runs on a thread of its own, and the request waits for it until its deadline at most
(TimeoutError then). A lookup that outlives its request keeps its thread until the system
resolver gives up: at most LOOKUPS run at once in a process, and a request waits for one of
them within its deadline too. An address literal is never looked up. No cache: a request
looks a name up only to open a connection, and connections are kept alive (`http_pool.py`)."""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Sequence

LOOKUPS = 4
"""Lookups one process runs at once."""

Address = tuple[socket.AddressFamily, socket.SocketKind, int, str,
                tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes] | str]
"""One of `getaddrinfo`'s: family, type, protocol, canonical name, socket address."""


class _Lookup:
    __slots__ = ("addresses", "done", "failure")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.addresses: Sequence[Address] = ()
        self.failure: OSError | None = None


def _look_up(host: str, port: int, lookup: _Lookup, slot: threading.BoundedSemaphore) -> None:
    try:
        lookup.addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        lookup.failure = exc
    except Exception as exc:  # an IDNA refusal (UnicodeError), say: the request's to report
        lookup.failure = OSError(f"the endpoint's name cannot be looked up: "
                                 f"{type(exc).__name__}")
    finally:
        slot.release()
        lookup.done.set()


class Resolver:
    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # Also in a forked child: the parent's lookups are not there to give their slots back.
        self._slots = threading.BoundedSemaphore(LOOKUPS)

    def addresses(self, host: str, port: int, until: float) -> Sequence[Address]:
        """`host`'s addresses for a TCP connection to `port`, by `until` (`time.monotonic`)
        at most; socket.gaierror when it has none."""
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                      flags=socket.AI_NUMERICHOST)
        if not self._slots.acquire(timeout=max(0.0, until - time.monotonic())):
            raise TimeoutError(f"no lookup of the {LOOKUPS} this process runs at once came "
                               "free before the request's deadline")
        lookup = _Lookup()
        try:
            threading.Thread(target=_look_up, args=(host, port, lookup, self._slots),
                             name="s3-lookup", daemon=True).start()
        except BaseException:
            self._slots.release()
            raise
        if not lookup.done.wait(max(0.0, until - time.monotonic())):
            raise TimeoutError("the endpoint's name was not resolved before the request's "
                               "deadline")
        if lookup.failure is not None:
            raise lookup.failure
        return lookup.addresses

RESOLVER = Resolver()
"""The process's."""
