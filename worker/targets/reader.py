"""A restore point's bytes, read at random whatever kind of target keeps them: what a
file-level restore parses (issue 34), a byte range at a time. `DataPath.reader(rt, rp)`
opens one for its kind (`worker/engine/rbd_reader.py`, `chunk_reader.py`, on what they
share: `block_reader.py`).

Every block (an RBD object, a chunk) is checked as it is read, by the one check its kind's
restore and verify make too (`Manifest.check`, `ChunkStore.get_chunk`): a damaged or
missing block raises DataCorrupt naming it and its offset, never returns wrong bytes."""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self

from worker.engine.block_reader import Extent


class RestorePointReader(Protocol):
    @property
    def size(self) -> int:
        """The restore point's size in bytes (the volume's at its backup)."""

    @property
    def block_size(self) -> int:
        """What one check covers: a read of one byte costs its whole block (cached)."""

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes at `offset`, fewer where the restore point ends (none past it),
        every block they lie in checked; DataCorrupt naming the first block that fails."""

    def pieces(self, offset: int, length: int) -> list[bytes]:
        """What `read` answers, in pieces (one a block, whole blocks not copied)."""

    def extents(self) -> list[Extent]:
        """Where the restore point may hold data, in order; every other byte reads as
        zeros and costs no fetch."""

    def close(self) -> None:
        """Release what the reader holds (an open image, its cache, its threads)."""

    def __enter__(self) -> Self: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None: ...
