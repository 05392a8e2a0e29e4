"""A RestorePointReader (worker/targets/reader.py) over a local image file, for tests of
file-level restore that need no target: the filesystems tests/support/fs_images.py builds,
read as a restore point would be.

`corrupt` names blocks (by index, of `block_size`) whose reads raise DataCorrupt as a
damaged chunk or RBD object would; it may be changed while the reader is in use. `reads`
counts the read calls and `bytes_read` what they returned, for tests of caching and
budgets."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Self

from services.errors import DataCorrupt
from worker.engine.block_reader import Extent, blocks_of

DEFAULT_BLOCK_SIZE = 4 << 20


class FileReader:
    def __init__(self, path: Path | str, *, block_size: int = DEFAULT_BLOCK_SIZE,
                 corrupt: set[int] | None = None) -> None:
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size
        self._block_size = block_size
        self.corrupt = set(corrupt or ())
        self.reads = 0
        self.bytes_read = 0
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return self._size

    @property
    def block_size(self) -> int:
        return self._block_size

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise ValueError(f"a read of {length} bytes at offset {offset}")
        if self._fd < 0:
            raise ValueError("read from a closed restore point reader")
        for index in blocks_of(offset, length, self._size, self._block_size):
            if index in self.corrupt:
                raise DataCorrupt(f"block {index} of {self.path.name} (offset "
                                  f"{index * self._block_size}) failed its checksum",
                                  block=index)
        data = os.pread(self._fd, max(0, min(length, self._size - offset)), offset)
        with self._lock:
            self.reads += 1
            self.bytes_read += len(data)
        return data

    def pieces(self, offset: int, length: int) -> list[bytes]:
        return [self.read(offset, length)]

    def extents(self) -> list[Extent]:
        return [Extent(0, self._size)] if self._size else []

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
