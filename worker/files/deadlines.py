"""A long request's deadline and its client's going away, checked between its steps (a
versions request between restore points and between a hash's pieces, an archive between
its walks)."""

from __future__ import annotations

import threading
import time


class Late(Exception):
    """A request's deadline passed, or its client went away."""


class Stop:
    """A request's deadline and its client's going away, checked between its steps."""

    def __init__(self, seconds: float, cancelled: threading.Event | None) -> None:
        self.seconds = seconds
        self.until = time.monotonic() + seconds
        self.cancelled = cancelled

    def left(self) -> float:
        return max(0.0, self.until - time.monotonic())

    def check(self) -> None:
        if self.cancelled is not None and self.cancelled.is_set():
            raise Late("the client went away")
        if time.monotonic() >= self.until:
            raise Late(f"not read within the request's {self.seconds:g} s: ask for fewer "
                        "restore points")
