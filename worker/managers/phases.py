"""Where a job's time goes, phase by phase (queue wait, claim, open, snapshot, plan, copy,
target snapshot, manifest, commit for a backup): measured as laps, so instrumenting a
manager is one line after each step, and published on the job when it ends."""

from __future__ import annotations

import json
import time


class Phases:
    def __init__(self, **known: float) -> None:
        self.seconds: dict[str, float] = dict(known)
        self._last = time.monotonic()

    def restart(self) -> None:
        """The next lap starts now (time before it belongs to no phase)."""
        self._last = time.monotonic()

    def lap(self, name: str) -> float:
        """Charge the time since the last lap to `name` (added up when it recurs)."""
        now = time.monotonic()
        spent = now - self._last
        self._last = now
        self.seconds[name] = self.seconds.get(name, 0.0) + spent
        return spent

    def move(self, source: str, to: str, seconds: float) -> None:
        """Of what `source` was charged, `seconds` belong to `to` (a step that measured a
        part of itself, as the copy engine does)."""
        seconds = max(0.0, min(seconds, self.seconds.get(source, 0.0)))
        self.seconds[source] = self.seconds.get(source, 0.0) - seconds
        self.seconds[to] = self.seconds.get(to, 0.0) + seconds

    def to_json(self) -> str:
        return json.dumps({name: round(value, 4) for name, value in self.seconds.items()})
