"""Numbers as a person reads them in `cairn`'s tables: binary sizes, rates, and durations
that never round a short job to nothing."""

from __future__ import annotations

import pytest

from cairnclient.units import duration, rate, size


@pytest.mark.parametrize(("count", "shown"), [
    (0, "0 B"), (512, "512 B"), (1536, "1.5 KiB"), (1073741824, "1.0 GiB"),
    (5 * 2**40, "5.0 TiB"), (None, "")])
def test_sizes_in_binary_units(count: int | None, shown: str) -> None:
    assert size(count) == shown


def test_a_rate_per_second() -> None:
    assert rate(59012841.66899488) == "56.3 MiB/s"
    assert rate(None) == ""


@pytest.mark.parametrize(("seconds", "shown"), [
    (0.3, "0.3 s"), (0.04, "0.0 s"), (9.94, "9.9 s"), (12.4, "12 s"), (125, "2 min 5 s"),
    (3 * 3600 + 4 * 60, "3 h 4 min"), (2 * 86400 + 5 * 3600, "2 d 5 h")])
def test_durations_keep_a_short_job_visible(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown
