"""Where a chunk-format target (ADR 0007) keeps its blobs: sealed chunks, sealed manifests
and the wrapped data key, each under a key such as `chunks/<project>/<ab>/<name>`
(`object_layout.py`). The chunk store, its garbage collection, the data key's rules and the
orphan scan of manifests ask only this; an S3 bucket (`s3.Bucket`) and a POSIX directory
(`directory.Directory`) provide it.

What every backend promises, because the rules above it rest on it:
- `put` replaces the blob whole or not at all: a reader never sees half of one;
- `put_new` writes only when nothing is under the key, decided atomically by the backend
  (the data key is "created exactly once, never silently replaced", `data_keys.py`);
- `get` reads no more than `limit` bytes: a longer blob is DataCorrupt, naming the key,
  with the rest unread (whoever holds the storage can put anything there);
- a missing key is None from `get` and `size`, never an error; `delete` of one is no error;
- `list` gives what was written before it began (list-after-write), in key order, each
  with the time it was last written (garbage collection spares what is newer than its
  cutoff), and never anything but Cairn's blobs (no half-written ones);
- errors are Cairn's: StorageUnavailable (try again later), StorageError, DataCorrupt."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from typing_extensions import Buffer


@dataclass(frozen=True)
class StoredObject:
    key: str
    """Relative to the target's root (an S3 target's prefix, a directory target's path)."""
    size: int
    modified: datetime
    """When it was last written (the storage's clock)."""


class ChunkBackend(Protocol):
    @property
    def where(self) -> str:
        """What messages call where its blobs live, in its kind's word: "bucket and
        prefix", "directory" (`data_keys.py`: "put the key back in the target's ...")."""

    def put(self, key: str, data: Buffer) -> None:
        """Stores `data` under `key`, replacing what was there, whole or not at all."""

    def put_new(self, key: str, data: bytes) -> bool:
        """Stores `data` under `key` only if nothing is there (checked atomically); False
        when something is, written by whoever came first."""

    def get(self, key: str, *, limit: int) -> bytes | bytearray | None:
        """The blob, None when there is none (a bytearray when it was read into one buffer
        as it arrived: a 4 MiB chunk is not copied once more to make it bytes). `limit`: the
        most bytes it can legitimately hold; a longer one is DataCorrupt, and the rest of it
        is never read."""

    def size(self, key: str) -> int | None:
        """The blob's size, None when there is none."""

    def delete(self, key: str) -> None:
        """Removes the blob; one already gone is no error."""

    def holds_any(self, prefix: str) -> bool:
        """Whether any blob's key starts with `prefix`."""

    def list(self, prefix: str = "", *, deadline: float, most: int | None = None
             ) -> Iterator[StoredObject]:
        """Every blob whose key starts with `prefix`, in key order. `deadline`: a
        `time.monotonic()` by which the listing must have ended; one still going then is
        StorageError (whoever holds the storage can make a listing that never ends). It has
        no default, so that no caller can forget it. `most`: the most blobs the caller
        counts on (a bounded listing): a backend that pages asks for no more pages than
        those and a margin (`s3.LIST_PAGES_MARGIN`), StorageError past it, so that pages
        without keys cannot go on to the deadline for nothing."""

    def close(self) -> None:
        """Gives back what the client holds (connections)."""
