"""The parser's operations (worker/files/parser/ops.py) in-process over real images made by
the real tools (tests/support/fs_images.py): every file of the source tree is listed with
its type and size, and its bytes, read through `read` and straight off the image at the
offsets `runs` gives, have the source's sha256."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from tests.support.fs_images import Image
from worker.files.parser.errors import Encrypted, NotADir, NotFound, Unreadable
from worker.files.parser.ops import MAX_READ, Operations
from worker.files.parser.paths import display_name

KINDS = ["ext4", "xfs", "ntfs", "fat32", "btrfs"]


def opened(image: Image) -> Iterator[tuple[Operations, BinaryIO]]:
    with image.path.open("rb") as fh:
        yield Operations(fh, image.path.stat().st_size), fh


def shown(path: str) -> str:
    return "/".join(display_name(part) for part in path.split("/"))


def check_tree(ops: Operations, fh: BinaryIO, partition: int | None, image: Image) -> None:
    tree = image.tree
    assert tree.files, "the image holds files to compare"
    for path, sha in tree.files.items():
        entry = ops.stat(partition, shown(path))
        assert (entry["type"], entry["size"]) == ("file", tree.sizes[path]), path
        data = b"".join(ops.read(partition, shown(path), at, MAX_READ)
                        for at in range(0, entry["size"], MAX_READ))
        assert hashlib.sha256(data).hexdigest() == sha, path
        runs = ops.runs(partition, shown(path), 10_000)
        if runs is not None:
            assert runs["size"] == entry["size"]
            pieces = []
            for offset, length in runs["runs"]:
                if offset is None:
                    pieces.append(bytes(length))
                else:
                    fh.seek(offset)
                    pieces.append(fh.read(length))
            assert hashlib.sha256(b"".join(pieces)).hexdigest() == sha, path
    for path in tree.dirs:
        assert ops.stat(partition, shown(path))["type"] == "dir", path
    for path, target in tree.symlinks.items():
        entry = ops.stat(partition, shown(path))
        assert (entry["type"], entry["target"]) == ("symlink", target), path
    listed = {e["path"] for e in ops.walk(partition, "/", 10_000)["entries"]}
    assert {shown(p) for p in (*tree.files, *tree.dirs, *tree.symlinks)} <= listed


@pytest.mark.parametrize("kind", KINDS)
def test_every_file_of_a_whole_disk_filesystem_reads_as_its_source(
        images: dict[str, Image], kind: str) -> None:
    image = images[kind]
    for ops, fh in opened(image):
        [partition] = ops.partitions()
        assert (partition["scheme"], partition["filesystem"], partition["readable"]) == (
            "disk", kind, True)
        assert partition["label"] is not None
        check_tree(ops, fh, None, image)


@pytest.mark.parametrize("kind", KINDS)
def test_a_directory_pages_by_name_and_a_search_finds_by_pattern(
        images: dict[str, Image], kind: str) -> None:
    image = images[kind]
    directory = "/many" if kind != "ntfs" else "/"
    for ops, _ in opened(image):
        names, marker = [], None
        while True:
            page = ops.list(None, directory, marker, 7)
            assert len(page["entries"]) <= 7
            names += [e["name"] for e in page["entries"]]
            marker = page["next_marker"]
            if marker is None:
                break
        assert names == sorted(names, key=lambda name: name.encode())
        assert len(names) == len(set(names)) == len(ops.list(None, directory, None, 1000)[
            "entries"])
        found = ops.search(None, "/", "*.txt", 1000, 10_000)
        expected = {shown(p) for p in image.tree.files if p.endswith(".txt")}
        assert {e["path"] for e in found["entries"]} == expected
        assert not found["truncated"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_path_through_a_file_or_up_the_tree_is_refused(
        images: dict[str, Image], kind: str) -> None:
    for ops, _ in opened(images[kind]):
        with pytest.raises(NotADir):
            ops.list(None, "/hello.txt/x", None, 10)
        with pytest.raises(NotFound):
            ops.stat(None, "/../hello.txt")
        with pytest.raises(NotFound):
            ops.stat(None, "/no-such-file")


def test_a_gpt_disk_lists_its_partitions_and_reads_each(images: dict[str, Image]) -> None:
    disk = images["gpt"]
    for ops, fh in opened(disk):
        partitions = ops.partitions()
        assert [(p["index"], p["scheme"], p["offset"], p["filesystem"], p["name"])
                for p in partitions] == [
            (1, "gpt", disk.partitions[0][0], "ext4", "part 1"),
            (2, "gpt", disk.partitions[1][0], "fat32", "part 2")]
        assert [p["size"] for p in partitions] == [size for _, size, _ in disk.partitions]
        check_tree(ops, fh, 1, images["ext4"])
        check_tree(ops, fh, 2, images["fat32"])


def test_an_mbr_disk_reads_primary_and_logical_partitions(images: dict[str, Image]) -> None:
    disk = images["mbr"]
    for ops, fh in opened(disk):
        partitions = ops.partitions()
        assert [(p["index"], p["scheme"], p["offset"], p["filesystem"]) for p in partitions] == [
            (1, "mbr", disk.partitions[0][0], "ext4"),
            (5, "mbr", disk.partitions[1][0], "ntfs"),
            (6, "mbr", disk.partitions[2][0], "fat32")]
        check_tree(ops, fh, 5, images["ntfs"])
        check_tree(ops, fh, 6, images["fat32"])


def test_a_luks_volume_is_named_encrypted(images: dict[str, Image]) -> None:
    for ops, _ in opened(images["luks"]):
        [partition] = ops.partitions()
        assert not partition["readable"]
        assert partition["reason"] == "encrypted volume: files cannot be listed"
        with pytest.raises(Encrypted):
            ops.list(None, "/", None, 10)


def test_garbage_is_unreadable_not_an_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.img"
    garbage.write_bytes(os.urandom(4 << 20))
    with garbage.open("rb") as fh:
        ops = Operations(fh, 4 << 20)
        [partition] = ops.partitions()
        assert not partition["readable"]
        assert partition["reason"]
        with pytest.raises(Unreadable):
            ops.list(None, "/", None, 10)


def test_a_damaged_partition_table_is_unreadable(tmp_path: Path,
                                                 images: dict[str, Image]) -> None:
    damaged = tmp_path / "damaged.img"
    data = bytearray(images["gpt"].path.read_bytes()[:1 << 20])
    data[512 + 80:512 + 84] = (0xFFFFFFFF).to_bytes(4, "little")  # 4 billion entries
    damaged.write_bytes(bytes(data))
    with damaged.open("rb") as fh:
        partitions: list[dict[str, Any]] = Operations(fh, len(data)).partitions()
        assert not any(p["readable"] for p in partitions)
