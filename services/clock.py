"""The time schedules are read against: which slots are due, whether a backup window is
open, which restore points retention keeps and which locks hold. The scheduler, the workers
and the API read this one clock (the API through `api.deps.NowDep`). Production reads the
system clock; development
and tests may point `CAIRN_CLOCK_FILE` at a file holding an ISO 8601 time, so a test moves a
real scheduler through days, DST changes and outages in seconds. The file's time runs on
from the moment it was written. Liveness bookkeeping (heartbeats, when a job was sent) always
uses the real clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from services.base import utcnow
from services.errors import InvalidInput, InvalidSchedule

Clock = Callable[[], datetime]


def file_clock(path: Path) -> Clock:
    def now() -> datetime:
        text = path.read_text().strip()
        value = datetime.fromisoformat(text)
        if value.tzinfo is None:
            raise ValueError(f"clock file {path} holds a time without a zone: {text!r}")
        written = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        return value.astimezone(UTC) + max(utcnow() - written, timedelta(0))
    return now


def set_file_clock(path: Path, at: datetime) -> None:
    """Set a file clock (tests): atomically, so a reader never sees half a time."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(at.isoformat())
    tmp.replace(path)


def clock_for(clock_file: Path | None) -> Clock:
    return utcnow if clock_file is None else file_clock(clock_file)


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
"""The times a user may give: arithmetic near the calendar's ends (year 1, 9999) overflows,
and nothing Cairn keeps lies outside these."""


def require_aware(value: datetime | None, field: str) -> datetime | None:
    """A time a user gave must say its zone (a naive one is refused rather than guessed) and
    lie between EARLIEST and LATEST."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise InvalidInput(f"{field} needs a timezone, e.g. 2026-11-21T00:00:00Z", field=field)
    try:
        inside = EARLIEST <= value < LATEST
    except OverflowError:  # an offset that pushes year 1 or 9999 off the calendar
        inside = False
    if not inside:
        raise InvalidInput(f"{field} must lie between {EARLIEST.date().isoformat()} and "
                           f"{LATEST.date().isoformat()}", field=field)
    return value


def zone(name: str, *, field: str = "timezone") -> ZoneInfo:
    """The IANA zone of that name, or a refusal naming the field and examples."""
    try:
        if not name or name != name.strip():
            raise ZoneInfoNotFoundError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"unknown timezone {name!r}: use an IANA name such as "
                              "'Europe/Berlin', 'America/New_York' or 'UTC'",
                              field=field) from None
