"""The addresses of an endpoint's name, looked up within a request's deadline.

`getaddrinfo` cannot be interrupted, and its only bound is the system resolver's (resolv.conf's
timeout x attempts, for each name server: 10 s and more by default); whoever serves the
endpoint's domain, the bucket holder as often as not, decides how long it answers. So each
lookup runs on a thread of its own, and the request waits for it until its deadline at most
(TimeoutError then). A lookup that outlives its request keeps its thread until the system
resolver gives up; one name has at most one lookup running at a time, which every request
for that name waits on (within its own deadline), so a name whose servers never answer
holds one thread, never another name's: at most LOOKUPS names are looked up at once in a
process, and a request for a new name waits for one of those within its deadline. A lookup
that failed is answered again for FAILURE_SECONDS without looking the name up again. An
address literal is never looked up. No other cache: a request looks a name up only to open a
connection, and connections are kept alive (`http_pool.py`)."""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Sequence

LOOKUPS = 32
"""Names one process looks up at once (each on a thread of its own, one lookup per name)."""
FAILURE_SECONDS = 5.0
"""How long a failed lookup's answer is given again without a new lookup: a name whose
servers fail is asked again at most this often, whatever the requests for it."""

Address = tuple[socket.AddressFamily, socket.SocketKind, int, str,
                tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes] | str]
"""One of `getaddrinfo`'s: family, type, protocol, canonical name, socket address."""


class _Lookup:
    __slots__ = ("addresses", "done", "ended", "failure")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.addresses: Sequence[Address] = ()
        self.failure: OSError | None = None
        self.ended = 0.0
        """When it ended (`time.monotonic`)."""


class Resolver:
    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # Also in a forked child: the parent's lookups are not there to end.
        self._lock = threading.Lock()
        self._lookups: dict[tuple[str, int], _Lookup] = {}
        """The lookup running for each name and port, or the last that failed."""
        self._running = 0
        self._slot_freed = threading.Condition(self._lock)

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
        lookup = self._lookup((host, port), until)
        if not lookup.done.wait(max(0.0, until - time.monotonic())):
            raise TimeoutError("the endpoint's name was not resolved before the request's "
                               "deadline")
        if lookup.failure is not None:
            raise lookup.failure
        return lookup.addresses

    def _lookup(self, name: tuple[str, int], until: float) -> _Lookup:
        """The lookup of `name` running, or one that failed less than FAILURE_SECONDS ago,
        or a new one once fewer than LOOKUPS run (waiting until `until` at most)."""
        with self._lock:
            while True:
                lookup = self._lookups.get(name)
                if lookup is not None and (not lookup.done.is_set() or (
                        lookup.failure is not None
                        and time.monotonic() - lookup.ended < FAILURE_SECONDS)):
                    return lookup
                if self._running < LOOKUPS:
                    break
                if not self._slot_freed.wait(max(0.0, until - time.monotonic())):
                    raise TimeoutError(f"no lookup of the {LOOKUPS} this process runs at "
                                       "once came free before the request's deadline")
            now = time.monotonic()
            for old_name, old in list(self._lookups.items()):  # failures past their time
                if old.done.is_set() and now - old.ended >= FAILURE_SECONDS:
                    del self._lookups[old_name]
            lookup = _Lookup()
            threading.Thread(target=self._look_up, args=(name, lookup), name="s3-lookup",
                             daemon=True).start()
            self._lookups[name] = lookup
            self._running += 1
            return lookup

    def _look_up(self, name: tuple[str, int], lookup: _Lookup) -> None:
        host, port = name
        try:
            lookup.addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            lookup.failure = exc
        except Exception as exc:  # an IDNA refusal (UnicodeError), say: the request's to report
            lookup.failure = OSError(f"the endpoint's name cannot be looked up: "
                                     f"{type(exc).__name__}")
        finally:
            with self._lock:
                lookup.ended = time.monotonic()
                self._running -= 1
                # A failure stays to be answered again; an answer is not kept. Once
                # FAILURE_SECONDS have passed, the next lookup of the name replaces it.
                if lookup.failure is None and self._lookups.get(name) is lookup:
                    del self._lookups[name]
                self._slot_freed.notify_all()
            lookup.done.set()


RESOLVER = Resolver()
"""The process's."""
