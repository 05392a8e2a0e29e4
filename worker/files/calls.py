"""What the file service asks of a restore point's parser: the calls of a `ParserSession`
(worker/files/session.py; the operations of worker/files/parser/ops.py, answered by the
sandboxed child), written as a Protocol so the service's own logic (its table of open
restore points, downloads, archives, versions) is tested with a fake parser.

Entries and partitions are the child's dicts as they come (docs/files.md); errors are
services.errors classes (PathNotFound, NotADirectory, IsADirectory, FilesUnreadable,
FilesEncrypted, ParserLimitExceeded, RestorePointDamaged)."""

from __future__ import annotations

from typing import Any, Protocol

Entry = dict[str, Any]
"""{"name", "type": file|dir|symlink|other, "size", "mode", "uid", "gid", "mtime",
"target"}, and "path" where a call answers paths."""

READ_BYTES = 4 << 20
"""The most one `read` call returns."""


class ParserCalls(Protocol):
    def partitions(self) -> list[dict[str, Any]]: ...

    def list(self, partition: int | None, path: str, marker: str | None,
             limit: int) -> dict[str, Any]: ...

    def stat(self, partition: int | None, path: str) -> Entry: ...

    def runs(self, partition: int | None, path: str,
             max_runs: int) -> dict[str, Any] | None: ...

    def read(self, partition: int | None, path: str, offset: int, length: int) -> bytes: ...

    def search(self, partition: int | None, path: str, pattern: str, limit: int,
               max_visits: int) -> dict[str, Any]: ...

    def walk(self, partition: int | None, path: str, max_entries: int) -> dict[str, Any]: ...

    def close(self) -> None: ...
