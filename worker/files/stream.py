"""Bytes made on a thread of their own, a bounded window ahead of whoever sends them: a
download reads its next blocks from the restore point while the client takes the last
ones, and an archive is written (tarfile, zipfile: both push their output) while it is
sent. Memory is the window: a producer that gets ahead waits.

`close` stops the producer and waits for it: what it reads (a reader, a parser session) is
released only after, never under a read still in flight."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self

Put = Callable[[bytes], None]
"""What a producer hands each piece to; it waits while the window is full."""

_POLL_SECONDS = 0.1


class _Stopped(Exception):
    """The consumer closed the stream: the producer leaves whatever it was doing."""


class _End:
    pass


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = _End()


class Produced:
    """The pieces `produce` puts, in order, at most `window` of them waiting; what it
    raises is raised to the consumer after the pieces before it."""

    def __init__(self, produce: Callable[[Put], None], *, window: int, name: str) -> None:
        if window < 1:
            raise ValueError(f"a window of {window} pieces")
        self._queue: queue.Queue[bytes | _End | _Failed] = queue.Queue(maxsize=window)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._run, args=(produce,), name=name,
                                        daemon=True)
        self._thread.start()

    def _put(self, item: bytes | _End | _Failed) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_SECONDS)
            except queue.Full:
                continue
            return
        raise _Stopped

    def _run(self, produce: Callable[[Put], None]) -> None:
        last: _End | _Failed = _END
        try:
            produce(self._put)
        except _Stopped:
            return
        except BaseException as error:  # handed to the consumer, who raises it
            last = _Failed(error)
        with contextlib.suppress(_Stopped):
            self._put(last)

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._done:
            raise StopIteration
        item = self._queue.get()
        if isinstance(item, _End):
            self._done = True
            raise StopIteration
        if isinstance(item, _Failed):
            self._done = True
            raise item.error
        return item

    def close(self) -> None:
        """Stop the producer (at its next piece) and wait until it has ended."""
        self._stop.set()
        self._done = True
        while self._thread.is_alive():
            # A producer blocked on a full window sees the stop within a poll.
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=_POLL_SECONDS)
        self._thread.join()
        # A consumer waiting on another thread (a download the service ended) sees the end.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_END)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


class Coalescing:
    """A file-like sink (write, flush) for a writer that pushes small pieces (tarfile's
    10 KiB records, zipfile's headers and deflate output): handed on in pieces of at least
    `piece` bytes, and what is left at `flush` or `close`."""

    def __init__(self, put: Put, piece: int = 256 << 10) -> None:
        self._put = put
        self._piece = piece
        self._parts: list[bytes] = []
        self._held = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._parts.append(bytes(data))
        self._held += len(data)
        if self._held >= self._piece:
            self.flush()
        return len(data)

    def flush(self) -> None:
        if self._parts:
            joined = b"".join(self._parts)
            self._parts, self._held = [], 0
            self._put(joined)

    def close(self) -> None:
        self.flush()
