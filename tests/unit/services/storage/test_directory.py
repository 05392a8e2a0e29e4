"""A directory target's backend on a real file system (tmp_path): blobs written whole or
not at all, created exactly once among racing writers, read no further than they may be,
listed by prefix in key order without half-written files, and a directory whose content
was tampered with (links out of it, files in place of directories, FIFOs, hostile keys)
refused rather than followed."""

from __future__ import annotations

import math
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.errors import DataCorrupt, StorageError, StorageUnavailable
from services.storage.chunk_backend import ChunkBackend
from services.storage.directory import Directory

CHUNK = "chunks/project-a/ab/ab" + "0" * 62
MANIFEST = "manifests/project-a/0b5e4f9a-1111-4222-8333-944445555666"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "target"
    made.mkdir()
    return made


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_blob_comes_back_as_written_and_a_rewrite_replaces_it(root: Path) -> None:
    backend: ChunkBackend = Directory(root)
    assert backend.get(CHUNK, limit=100) is None
    assert backend.size(CHUNK) is None
    backend.put(CHUNK, b"first")
    assert backend.get(CHUNK, limit=100) == b"first"
    assert (root / CHUNK).read_bytes() == b"first"  # the key is the path below the root
    backend.put(CHUNK, b"second, longer")
    assert backend.get(CHUNK, limit=100) == b"second, longer"
    assert backend.size(CHUNK) == len(b"second, longer")
    backend.delete(CHUNK)
    backend.delete(CHUNK)  # gone already: no error
    backend.delete("manifests/nobody/nothing")  # nor a key whose directories never were
    assert backend.get(CHUNK, limit=100) is None
    assert files_under(root) == []


def test_a_read_stops_at_its_limit_and_refuses_a_longer_file(root: Path) -> None:
    backend = Directory(root)
    backend.put(MANIFEST, b"x" * 64)
    assert backend.get(MANIFEST, limit=64) == b"x" * 64
    (root / MANIFEST).write_bytes(b"x" * 65)  # appended to outside Cairn
    with pytest.raises(DataCorrupt, match="is 65 bytes, more than the 64"):
        backend.get(MANIFEST, limit=64)


def test_of_writers_racing_to_create_a_key_exactly_one_wins_and_its_bytes_stay(
        root: Path) -> None:
    backend = Directory(root)
    writers = 16
    start = threading.Barrier(writers)
    won: list[int] = []

    def write(n: int) -> None:
        start.wait()
        if backend.put_new("keys/data-key", f"key of writer {n}".encode()):
            won.append(n)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1, won
    assert backend.get("keys/data-key", limit=100) == f"key of writer {won[0]}".encode()
    assert backend.put_new("keys/data-key", b"late") is False
    assert backend.get("keys/data-key", limit=100) == f"key of writer {won[0]}".encode()
    assert files_under(root) == ["keys/data-key"]  # no temporary file left behind


def test_a_listing_gives_what_starts_with_the_prefix_in_key_order(root: Path) -> None:
    backend = Directory(root)
    keys = ["chunks/p/ab/ab1", "chunks/p/cd/cd1", "chunks/p-2/ab/ab2", "chunks/q/ab/ab3",
            "manifests/p/rp-1", "manifests/pq/rp-2", "keys/data-key"]
    before = datetime.now(UTC) - timedelta(seconds=5)
    for key in keys:
        backend.put(key, key.encode())
    listed = list(backend.list(deadline=math.inf))
    assert [o.key for o in listed] == sorted(keys)  # "p-2/" sorts before "p/", as in S3
    assert all(o.size == len(o.key) and o.modified >= before for o in listed)
    assert [o.key for o in backend.list("chunks/p/", deadline=math.inf)] == [
        "chunks/p/ab/ab1", "chunks/p/cd/cd1"]
    assert [o.key for o in backend.list("manifests/p", deadline=math.inf)] == [
        "manifests/p/rp-1", "manifests/pq/rp-2"]
    assert [o.key for o in backend.list("chunks/nobody/", deadline=math.inf)] == []
    assert backend.holds_any("manifests/")
    assert backend.holds_any("chunks/q/")
    assert not backend.holds_any("chunks/r/")
    # A listing still going at its deadline is refused, where it is.
    assert len(list(backend.list(deadline=math.inf))) == len(keys)
    listing = backend.list(deadline=time.monotonic() - 1)
    with pytest.raises(StorageError, match="did not end by its deadline"):
        next(listing)


def test_a_write_killed_before_its_rename_leaves_no_blob_and_its_file_is_found(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = Directory(root)
    backend.put(CHUNK, b"whole")

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # stands for the process dying between write and rename

    with monkeypatch.context() as patch:
        patch.setattr(os, "rename", killed)
        patch.setattr(os, "unlink", killed)  # and before it could clean up
        with pytest.raises(KeyboardInterrupt):
            backend.put(CHUNK, b"half")
        with pytest.raises(KeyboardInterrupt):
            backend.put(MANIFEST, b"never")
    assert backend.get(CHUNK, limit=100) == b"whole"
    assert backend.get(MANIFEST, limit=100) is None
    assert [o.key for o in backend.list(deadline=math.inf)] == [CHUNK]
    assert not backend.holds_any("manifests/")
    left = [o.key for o in backend.temporaries(deadline=math.inf)]
    assert len(left) == 2, left
    assert all("/.tmp." in key for key in left), left
    for key in left:
        backend.remove_temporary(key)
    assert list(backend.temporaries(deadline=math.inf)) == []
    with pytest.raises(StorageError, match="not a temporary file"):
        backend.remove_temporary(CHUNK)
    assert files_under(root) == [CHUNK]


@pytest.mark.parametrize("key", ["../outside", "chunks/../../outside", "/etc/passwd",
                                 "chunks//x", "chunks/./x", ".tmp.x", "chunks/.hidden/x",
                                 "chunks/a\x00b/x", "chunks/new\nline", "", "x" * 256])
def test_a_key_that_is_not_a_plain_relative_path_is_refused_before_any_file_is_touched(
        root: Path, key: str) -> None:
    backend = Directory(root)
    for call in (lambda: backend.put(key, b"x"), lambda: backend.put_new(key, b"x"),
                 lambda: backend.get(key, limit=1), lambda: backend.size(key),
                 lambda: backend.delete(key)):
        with pytest.raises(StorageError, match="does not name a file"):
            call()
    assert list(root.parent.rglob("*")) == [root]


def test_a_link_planted_in_the_directory_is_never_followed_out_of_it(
        root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "ab").mkdir(parents=True)
    (outside / "ab" / "secret").write_bytes(b"not Cairn's")
    (outside / "secret").write_bytes(b"not Cairn's")
    backend = Directory(root)
    (root / "chunks").mkdir()
    (root / "chunks" / "p").symlink_to(outside)  # a directory swapped for a link out
    (root / "manifests" / "p").mkdir(parents=True)
    (root / "manifests" / "p" / "rp").symlink_to(outside / "secret")  # a file swapped
    for key in ("chunks/p/ab/secret", "manifests/p/rp"):
        with pytest.raises(DataCorrupt, match=r"is a symbolic link, not a (file|directory) Cairn"):
            backend.get(key, limit=100)
    with pytest.raises(DataCorrupt, match="symbolic link"):
        backend.size("manifests/p/rp")
    with pytest.raises(DataCorrupt, match="symbolic link"):
        backend.put("chunks/p/ab/new", b"x")
    assert list(backend.list(deadline=math.inf)) == []  # links are not listed, nor walked through
    backend.delete("manifests/p/rp")  # removes the link itself
    assert not (root / "manifests" / "p" / "rp").is_symlink()
    assert sorted(p.name for p in outside.rglob("*")) == ["ab", "secret", "secret"]
    assert (outside / "secret").read_bytes() == b"not Cairn's"


def test_a_fifo_or_a_file_in_place_of_a_directory_is_refused_not_waited_on(
        root: Path) -> None:
    backend = Directory(root)
    (root / "manifests" / "p").mkdir(parents=True)
    os.mkfifo(root / "manifests" / "p" / "rp")
    with pytest.raises(DataCorrupt, match="special file"):
        backend.get("manifests/p/rp", limit=100)  # would block for ever if opened
    assert list(backend.list("manifests/", deadline=math.inf)) == []
    (root / "chunks").write_bytes(b"a file where a directory goes")
    with pytest.raises(DataCorrupt, match=r"chunks in the directory target .* is a file, not a "
                                          r"directory Cairn made"):
        backend.get("chunks/p/ab/x", limit=100)
    for call in (lambda: backend.put("chunks/p/ab/x", b"x"),
                 lambda: list(backend.list("chunks/", deadline=math.inf))):
        with pytest.raises(DataCorrupt, match="is a file, not a directory"):
            call()


def test_a_path_that_is_missing_or_not_a_directory_is_unavailable(tmp_path: Path) -> None:
    missing = Directory(tmp_path / "not-mounted")
    with pytest.raises(StorageUnavailable, match="does not exist"):
        missing.check()
    with pytest.raises(StorageUnavailable, match="does not exist"):
        missing.put(CHUNK, b"x")
    with pytest.raises(StorageUnavailable, match="does not exist"):
        list(missing.list(deadline=math.inf))
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(StorageUnavailable, match="is not a directory"):
        Directory(tmp_path / "file").check()
    (tmp_path / "mounted").mkdir()
    Directory(tmp_path / "mounted").check()
