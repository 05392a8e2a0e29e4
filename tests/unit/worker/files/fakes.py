"""A restore point for the file service's tests, without Ceph or a parser: a disk image in
memory and a parser that knows where its files lie (as `runs` would say), or reads them
itself (as for compressed data)."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

from services.errors import DataCorrupt, IsADirectory, NotADirectory, PathNotFound
from services.status import RestorePointStatus
from worker.engine.block_reader import Extent
from worker.files.open_points import Opened

BLOCK = 4096
MTIME = "2026-11-27T06:00:00.123456Z"


class FakeReader:
    """A restore point's bytes; `corrupt_from` makes reads past an offset fail."""

    def __init__(self, image: bytes, block_size: int = BLOCK) -> None:
        self.image = image
        self.block_size = block_size
        self.reads: list[tuple[int, int]] = []
        self.corrupt_from: int | None = None
        self.closed = False

    @property
    def size(self) -> int:
        return len(self.image)

    def read(self, offset: int, length: int) -> bytes:
        assert not self.closed, "read from a closed reader"
        self.reads.append((offset, length))
        if self.corrupt_from is not None and offset + length > self.corrupt_from:
            raise DataCorrupt(f"object {self.corrupt_from // self.block_size} is corrupt")
        return self.image[offset:offset + length]

    def pieces(self, offset: int, length: int) -> list[bytes]:
        data = self.read(offset, length)
        return [data[at:at + self.block_size] for at in range(0, len(data), self.block_size)]

    def extents(self) -> list[Extent]:
        return [Extent(0, self.size)]

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


class FakeFs:
    """A tree of entries; files either at runs of the image (`place`) or held by the
    parser (`inline`: no runs, read through the parser)."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {"/": self._entry("", "dir")}
        self.runs: dict[str, list[list[int | None]]] = {}
        self.inline: dict[str, bytes] = {}
        self.image = bytearray()

    @staticmethod
    def _entry(name: str, kind: str, size: int = 0, target: str | None = None,
               mode: int = 0o644) -> dict[str, Any]:
        return {"name": name, "type": kind, "size": size, "mode": mode, "uid": 1000,
                "gid": 1000, "mtime": MTIME, "target": target}

    def add(self, path: str, kind: str, *, data: bytes = b"", inline: bool = False,
            target: str | None = None, hole: int = 0) -> None:
        parent, _, name = path.rpartition("/")
        assert (parent or "/") in self.entries, path
        self.entries[path] = self._entry(name, kind, len(data) + hole, target,
                                         0o755 if kind == "dir" else 0o644)
        if kind != "file":
            return
        if inline:
            self.inline[path] = data + bytes(hole)
            return
        # Two pieces in reverse order on the disk, then a hole: runs as a real
        # filesystem's can be, not one contiguous range.
        half = len(data) // 2
        self._pad()
        second = len(self.image)
        self.image += data[half:]
        self._pad()
        first = len(self.image)
        self.image += data[:half]
        self.runs[path] = [[first, half], [second, len(data) - half]]
        if hole:
            self.runs[path].append([None, hole])

    def _pad(self) -> None:
        self.image += bytes(-len(self.image) % 1000 + 777)

    def data(self, path: str) -> bytes:
        if path in self.inline:
            return self.inline[path]
        return b"".join(bytes(self.image[d:d + (n or 0)]) if d is not None
                        else bytes(n or 0) for d, n in self.runs[path])


class FakeCalls:
    def __init__(self, fs: FakeFs) -> None:
        self.fs = fs
        self.closed = False
        self.calls: list[str] = []

    def _get(self, path: str) -> dict[str, Any]:
        if path not in self.fs.entries:
            raise PathNotFound(f"{path} not found", path=path)
        return self.fs.entries[path]

    def partitions(self) -> list[dict[str, Any]]:
        self.calls.append("partitions")
        return [{"index": 0, "scheme": "disk", "filesystem": "ext4", "readable": True}]

    def list(self, partition: int | None, path: str, marker: str | None,
             limit: int) -> dict[str, Any]:
        self.calls.append("list")
        if self._get(path)["type"] != "dir":
            raise NotADirectory(f"{path} is not a directory")
        prefix = path.rstrip("/") + "/"
        names = sorted(p for p in self.fs.entries if p != path and p.startswith(prefix)
                       and "/" not in p[len(prefix):])
        return {"path": path, "partition": partition,
                "entries": [self.fs.entries[n] for n in names][:limit], "next_marker": None}

    def stat(self, partition: int | None, path: str) -> dict[str, Any]:
        self.calls.append("stat")
        return {**self._get(path), "path": path}

    def runs(self, partition: int | None, path: str, max_runs: int) -> dict[str, Any] | None:
        self.calls.append("runs")
        if self._get(path)["type"] != "file":
            raise IsADirectory(f"{path} is not a file")
        if path in self.fs.inline:
            return None
        return {"size": self.fs.entries[path]["size"], "runs": self.fs.runs[path]}

    def read(self, partition: int | None, path: str, offset: int, length: int) -> bytes:
        self.calls.append("read")
        assert length <= 4 << 20
        return self.fs.data(path)[offset:offset + length]

    def search(self, partition: int | None, path: str, pattern: str, limit: int,
               max_visits: int) -> dict[str, Any]:
        self.calls.append("search")
        return {"entries": [], "truncated": False, "visited": 0}

    def walk(self, partition: int | None, path: str, max_entries: int) -> dict[str, Any]:
        self.calls.append("walk")
        self._get(path)
        prefix = path.rstrip("/") + "/"
        found = [p for p in self.fs.entries if p == path or p.startswith(prefix)]
        entries = [{**self.fs.entries[p], "path": p} for p in sorted(found)
                   if p != "/" or path == "/"]
        return {"entries": entries[:max_entries], "truncated": len(entries) > max_entries}

    def close(self) -> None:
        self.closed = True


FREE = 64 << 10
"""Bytes of a fake volume past its files' blocks."""


class FakePoints:
    """Restore points by id, each a FakeFs; counts openings."""

    def __init__(self, fs: FakeFs | None = None) -> None:
        self.fs = fs or FakeFs()
        self.statuses: dict[str, RestorePointStatus] = {}
        self.opened: list[Opened] = []
        self.openings: list[str] = []

    def open(self, restore_point_id: str) -> Opened:
        from services.errors import RestorePointNotFound
        self.openings.append(restore_point_id)
        if self.statuses.get(restore_point_id, RestorePointStatus.AVAILABLE) \
                != RestorePointStatus.AVAILABLE:
            raise RestorePointNotFound(f"restore point {restore_point_id} not found")
        # The volume: its files' blocks, then free space (a sparse file fits in it).
        opened = Opened(FakeReader(bytes(self.fs.image) + bytes(FREE)), FakeCalls(self.fs))
        self.opened.append(opened)
        return opened

    def status(self, restore_point_id: str) -> RestorePointStatus | None:
        return self.statuses.get(restore_point_id, RestorePointStatus.AVAILABLE)
