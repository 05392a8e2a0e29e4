"""Where a copy job's time goes, as a backup proxy's load line does it ("source 92 % >
engine 4 % > target 40 %"): the share of the copy's capacity each stage kept busy, and the
stage that limits the job.

The engine keeps `window` operations in flight, so reading and writing are measured against
window x copy time: a source at 100 % had every slot of the window waiting on reads. The
QoS share is the part of the copy time the submit loop slept for the job's limit; the engine
share is the CPU work between read and write (zero scan, checksums), against the cores."""

from __future__ import annotations

import os
from dataclasses import dataclass

STAGES = ("source", "target", "qos", "engine")


@dataclass(frozen=True)
class Load:
    source: float
    target: float
    qos: float
    engine: float

    @property
    def bottleneck(self) -> str:
        # A job that sleeps most of its time on its limit is limited by it, whatever the
        # rest: the other stages only look idle because QoS holds them back.
        if self.qos >= 0.5:
            return "qos"
        shares = {"source": self.source, "target": self.target, "engine": self.engine,
                  "qos": self.qos}
        return max(shares, key=lambda stage: shares[stage])


def job_load(*, copy_seconds: float, window: int | None, read_seconds: float,
             write_seconds: float, qos_wait_seconds: float, engine_seconds: float,
             cores: int | None = None) -> Load | None:
    """Shares in [0, 1], or None before the copy has run long enough to say."""
    if copy_seconds <= 0 or not window:
        return None
    slots = window * copy_seconds
    cpu = min(window, cores or os.cpu_count() or 1) * copy_seconds
    return Load(source=min(1.0, read_seconds / slots), target=min(1.0, write_seconds / slots),
                qos=min(1.0, qos_wait_seconds / copy_seconds),
                engine=min(1.0, engine_seconds / cpu))
