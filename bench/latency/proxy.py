"""A delay line in front of Ceph OSDs, for the latency benchmark.

    python bench/latency/proxy.py --delay 0.02 6800=31950 6801=31951

Listens on 127.0.0.1:<to> for each pair and forwards to 127.0.0.1:<from>. Every byte, in
either direction, is handed on `delay` seconds after it arrived, so a 4 MiB write pays two
delays (data out, reply back) on top of the OSD's own time. Operations in flight overlap as
on a real network with that latency: one connection's bytes keep their order, but nothing
waits for the operation before it. Ceph's own `ms_inject_delay_*` does not model this (its
delay queue hands replies over one after another, so 16 operations in flight wait for each
other), which is why the benchmark uses this proxy and a connect() redirect
(`redirect.c`) instead.

`--window BYTES` models TCP's window over that round trip: a sender keeps at most a window
of unacknowledged bytes, and its acknowledgements come back `delay` after the bytes
arrive, so one direction of a connection holds at most half a window on the line and one
connection carries at most `window / (2 x delay)` bytes a second, as across a real link.
Without it, a direction holds up to PAUSE_BYTES, a bound on the proxy's memory, not a
model: one connection then carries whatever the two ends can push.

Prints `ready` once it listens; stops on SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import collections
import signal
from typing import cast

PAUSE_BYTES = 64 << 20
"""Bytes queued in one direction before the proxy stops reading from its sender."""

READ_BYTES = 256 << 10
"""The most one read of the event loop hands over (uvloop's and asyncio's read size): the
proxy stops reading this much before its bound, so what is queued never passes it."""


class Leg(asyncio.Protocol):
    """One socket of a proxied connection: what it receives is written, `delay` later,
    to its peer leg's socket."""

    def __init__(self, delay: float, in_flight: int = PAUSE_BYTES) -> None:
        self.delay = delay
        self.in_flight = in_flight
        self.transport: asyncio.Transport | None = None
        self.peer: Leg | None = None
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.queued = 0
        self.timer: asyncio.TimerHandle | None = None
        self.closing = False
        self.loop = asyncio.get_running_loop()
        self.dialing: asyncio.Task[None] | None = None  # the client leg's upstream connect

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        self.queue.append((self.loop.time() + self.delay, data))
        self.queued += len(data)
        if self.queued > self.in_flight - READ_BYTES and self.transport is not None:
            self.transport.pause_reading()
        if self.timer is None:
            self.timer = self.loop.call_at(self.queue[0][0], self._release)

    def _release(self) -> None:
        """Hands every due chunk to the peer, in order, and waits for the next one."""
        self.timer = None
        if self.peer is None or self.peer.transport is None:
            self.timer = self.loop.call_later(0.001, self._release)
            return
        if self.peer.transport.is_closing():
            # The peer's socket is gone (the client closed it): what it was owed has nowhere
            # to go, and writing it would raise in the event loop.
            self.queue.clear()
            self.queued = 0
            return
        now = self.loop.time()
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.popleft()
            self.queued -= len(data)
            self.peer.transport.write(data)
        if (self.transport is not None and not self.transport.is_closing()
                and self.queued <= self.in_flight - READ_BYTES):
            self.transport.resume_reading()
        if self.queue:
            self.timer = self.loop.call_at(self.queue[0][0], self._release)
        elif self.closing:
            self.peer.transport.close()

    def eof_received(self) -> bool:
        self.connection_lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if not self.queue and self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


async def serve(listen_port: int, target_port: int, delay: float,
                in_flight: int = PAUSE_BYTES) -> asyncio.Server:
    loop = asyncio.get_running_loop()

    def accepted() -> Leg:
        client = Leg(delay, in_flight)

        async def dial() -> None:
            try:
                _, upstream = await loop.create_connection(lambda: Leg(delay, in_flight),
                                                           "127.0.0.1", target_port)
            except OSError:
                if client.transport is not None:
                    client.transport.close()
                return
            client.peer, upstream.peer = upstream, client

        client.dialing = loop.create_task(dial())
        return client

    return await loop.create_server(accepted, "127.0.0.1", listen_port)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay", type=float, required=True, help="seconds, one way")
    parser.add_argument("--window", type=int, default=0,
                        help="bytes: TCP's window over the round trip (0: no window)")
    parser.add_argument("pairs", nargs="+", help="target_port=listen_port")
    args = parser.parse_args()
    in_flight = args.window // 2 if args.window else PAUSE_BYTES
    servers = []
    for pair in args.pairs:
        target, listen = (int(p) for p in pair.split("="))
        servers.append(await serve(listen, target, args.delay, in_flight))
    print("ready", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


if __name__ == "__main__":
    import uvloop  # the API's event loop (a uvicorn dependency): ~2x less CPU per byte

    uvloop.run(main())
