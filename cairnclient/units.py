"""Numbers as a person reads them: sizes in binary units (`1.0 GiB`), rates (`56.3 MiB/s`),
durations that never round a short job to nothing (`0.3 s`, `2 min 5 s`). For tables and
messages only: a script reads the API's exact numbers (`-f json`)."""

from __future__ import annotations

from typing import Any

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def size(count: float | None) -> str:
    """`1073741824` as `1.0 GiB`; bytes below 1 KiB as a whole number (`512 B`)."""
    if count is None:
        return ""
    value = float(count)
    unit = 0
    while abs(value) >= 1024 and unit < len(UNITS) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{int(value)} B"
    return f"{value:.1f} {UNITS[unit]}"


def rate(bytes_per_second: float | None) -> str:
    """`59012841.66899488` as `56.3 MiB/s`."""
    return "" if bytes_per_second is None else f"{size(bytes_per_second)}/s"


def duration(seconds: float | None) -> str:
    """`0.3 s`, `12 s`, `2 min 5 s`, `3 h 4 min`, `2 d 5 h`: a tenth of a second under a
    minute (a job that took 0.3 s does not read as `0 s`), whole units above."""
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s"


def readable(key: str, value: Any) -> Any:
    """A number as a person reads it, by what its field's name says it counts: bytes
    (`size_bytes`, `bytes_read`, `size`), bytes per second (`rate_bytes_per_second`,
    `qos_bytes_per_second`) or seconds (`duration_seconds`); anything else as it is. `key`
    may be dotted (`progress.rate_bytes_per_second`, `timings.phases.copy`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    parent, _, name = key.rpartition(".")
    if name.endswith("bytes_per_second"):
        return rate(value)
    if name.endswith("_seconds") or parent.endswith("phases"):  # a job's seconds per phase
        return duration(value)
    if name == "size" or name.endswith("_bytes") or name.startswith("bytes_"):
        return size(value)
    return value
