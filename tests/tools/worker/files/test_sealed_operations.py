"""The parser as the file service runs it: sealed in its child (worker/files/session.py),
fed a restore point's bytes through the pipe. Every kind of filesystem lists and gives back
every file of its source tree byte for byte, and a damaged block of the restore point is
the restore point's fault (RestorePointDamaged), never a wrong byte or a 500."""

from __future__ import annotations

import hashlib

import pytest

from services.errors import RestorePointDamaged
from tests.support.file_reader import FileReader
from tests.support.fs_images import Image
from worker.files.parser.ops import MAX_READ
from worker.files.parser.paths import display_name
from worker.files.session import ParserSession

BLOCK = 64 << 10
KINDS = ["ext4", "xfs", "ntfs", "fat32", "btrfs", "gpt", "mbr"]


def shown(path: str) -> str:
    return "/".join(display_name(part) for part in path.split("/"))


def read_all(session: ParserSession, size: int) -> None:
    for at in range(0, size, MAX_READ):
        session.read(None, "/big.bin", at, MAX_READ)


@pytest.mark.parametrize("kind", KINDS)
def test_every_file_comes_back_exactly_through_the_sealed_child(
        images: dict[str, Image], kind: str) -> None:
    image = images[kind]
    with FileReader(image.path) as reader:
        session = ParserSession(reader)
        try:
            partitions = [p for p in session.partitions() if p["readable"]]
            assert partitions, "a readable filesystem is found"
            first = partitions[0]
            tree = image.tree if image.filesystem else images["ext4"].tree
            for path, sha in tree.files.items():
                entry = session.stat(first["index"], shown(path))
                assert entry["size"] == tree.sizes[path], path
                data = b"".join(session.read(first["index"], shown(path), at, MAX_READ)
                                for at in range(0, entry["size"], MAX_READ))
                assert hashlib.sha256(data).hexdigest() == sha, path
        finally:
            session.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_root_itself_stats_and_walks_through_the_sealed_child(
        images: dict[str, Image], kind: str) -> None:
    """`/` as a path asked for (a stat of it, an archive of all): the root is named "", a
    name never holding '/', and what it holds follows it."""
    with FileReader(images[kind].path) as reader:
        session = ParserSession(reader)
        try:
            first = next(p for p in session.partitions() if p["readable"])
            root = session.stat(first["index"], "/")
            assert (root["name"], root["path"], root["type"]) == ("", "/", "dir")
            walked = session.walk(first["index"], "/", 10_000)["entries"]
            assert (walked[0]["name"], walked[0]["path"]) == ("", "/")
            assert "/hello.txt" in {entry["path"] for entry in walked[1:]}
        finally:
            session.close()


def test_a_damaged_block_under_a_file_is_the_restore_points_fault(
        images: dict[str, Image]) -> None:
    image = images["ext4"]
    # Blocks of 64 KiB, not the 4 MiB of a real restore point: the damage hits the file's
    # data, not the superblock beside it in the image's first 4 MiB.
    with FileReader(image.path, block_size=BLOCK) as clean:
        session = ParserSession(clean)
        try:
            runs = session.runs(None, "/big.bin", 1024)
        finally:
            session.close()
    assert runs is not None, "big.bin is block-mapped"
    # The file's last mapped byte: deep in its data, far from the metadata a stat reads.
    offset, length = [run for run in runs["runs"] if run[0] is not None][-1]
    offset += length - 1
    with FileReader(image.path, block_size=BLOCK, corrupt={offset // BLOCK}) as reader:
        session = ParserSession(reader)
        try:
            with pytest.raises(RestorePointDamaged):
                read_all(session, runs["size"])
            # The session carries on: the next call gets a fresh child.
            assert session.stat(None, "/hello.txt")["type"] == "file"
        finally:
            session.close()
