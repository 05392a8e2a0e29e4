"""A download's answer (a file, an archive): its status, headers and body, the body
counting what it has handed the client so that the file service can end one that
stalls (`FileService.end_stalled_downloads`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass


class Body:
    """A download's bytes: the first piece already read (so a failure before it is an
    error status, not a cut connection), the rest as the producer makes them. `close`
    (at the end, or when the client goes) stops the producer, then releases the restore
    point and the project's slot."""

    def __init__(self, first: bytes | None, rest: Iterator[bytes], release: ExitStack,
                 on_error: Callable[[BaseException], None], started: float = 0.0) -> None:
        self._first = first
        self._rest = rest
        self._release = release
        self._on_error = on_error
        self._closing = threading.Lock()
        self.started = started
        self.sent = 0
        """Bytes handed to the client so far."""
        self.ended: str | None = None
        """Why the service ended the download before its end (too slow, too long)."""

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self.ended is not None:
            raise StopIteration
        if self._first is not None:
            first, self._first = self._first, None
            self.sent += len(first)
            return first
        try:
            piece = next(self._rest)
        except StopIteration:
            raise
        except BaseException as error:
            self._on_error(error)
            raise
        self.sent += len(piece)
        return piece

    def close(self) -> None:
        with self._closing:
            self._release.close()

    def end(self, why: str) -> None:
        """Ends the download from another thread (the service's watchdog): its producer
        stopped, its restore point released; the client's connection is cut."""
        self.ended = why
        self.close()


@dataclass
class Download:
    status: int
    headers: dict[str, str]
    media_type: str
    body: Body
