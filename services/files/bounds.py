"""The bounds of a file request's parameters, one constant each, used by both sides: the
public routes (api/params.py, api/routers/files.py) and the file service's internal ones
(worker/files/app.py). A request the API accepts is never refused behind it."""

from __future__ import annotations

from typing import Final

MAX_PATH_BYTES: Final = 4096
"""PATH_MAX of Linux: no filesystem Cairn reads names a longer path (UTF-8 bytes)."""

MAX_PATTERN_CHARS: Final = 255
"""A search's name pattern (a name is at most 255 bytes on every filesystem read)."""

MAX_ARCHIVE_PATHS: Final = 1000
"""Paths one archive download may name."""

MAX_PARTITION: Final = 65535
"""The highest partition index a request may name."""

MAX_PAGE: Final = 1000
"""Entries one listing or search answers at most."""

MAX_VERSIONS: Final = 60
"""Restore points one versions request reads."""
