"""The fuzz of issue 34, small (tests/support/fs_fuzz.py; `make fuzz-files` runs 1000 cases
per kind): each kind's real image with its superblocks, inodes, directory blocks, tables
and tree nodes mutated, browsed through sealed parser children with the production limits.
Every call ends within its deadline with a value of the right shape or a tenant's error
(4xx), never another exception (a 5xx), and no child's memory passes its limit.

A few fixed seeds per kind and one random seed (printed: CAIRN_FILES_FUZZ_SEED replays
it), and the defects the fuzz found, each as the case that showed it."""

from __future__ import annotations

import hashlib
import os
import random
import struct
import subprocess
import time

import pytest

from services.errors import FilesUnreadable
from tests.support import fs_fuzz
from tests.support.fs_images import Image
from worker.files.parser.ops import MAX_READ, Operations
from worker.files.parser.paths import display_name
from worker.files.session import ParserLimits, ParserSession

CASES = 5
"""Cases per kind from each seed: 10 a kind with the random seed's, 70 in all (~10 s)."""
FIXED_SEED = 34
LIMITS = ParserLimits()


@pytest.fixture(scope="module")
def targets(images: dict[str, Image]) -> dict[str, fs_fuzz.Target]:
    return {kind: fs_fuzz.metadata(kind, images[kind]) for kind in fs_fuzz.KINDS}


def random_seed() -> int:
    seed = int(os.environ.get("CAIRN_FILES_FUZZ_SEED") or random.randrange(1 << 30))
    print(f"fuzz seed {seed} (replay: CAIRN_FILES_FUZZ_SEED={seed})")
    return seed


@pytest.mark.parametrize("kind", fs_fuzz.KINDS)
def test_mutated_metadata_ends_in_time_in_a_value_or_a_4xx(
        targets: dict[str, fs_fuzz.Target], kind: str) -> None:
    target = targets[kind]
    tally = fs_fuzz.Tally(kind)
    seeds = [*range(FIXED_SEED, FIXED_SEED + CASES)]
    first = random_seed()
    seeds += range(first, first + CASES)
    for seed in seeds:
        tally.add(fs_fuzz.run_case(target, seed, LIMITS), LIMITS)
    assert not tally.failures, "\n".join(
        f"seed {case.seed}: {problems}; mutations: {case.mutations}; {case.replay()}"
        for case, problems in tally.failures)
    assert tally.calls >= 10 * len(seeds), "the cases browse (partitions, lists, reads...)"
    assert tally.outcomes["ok"], "some calls succeed: the mutations leave images readable"


def test_the_metadata_is_found_in_every_kind(targets: dict[str, fs_fuzz.Target]) -> None:
    tags = {kind: {region.tag for region in target.regions} for kind, target in targets.items()}
    assert {"superblock", "group-descriptors", "inode", "inode-dir", "directory"} <= tags["ext4"]
    assert {"superblock", "ag-header", "inode", "inode-dir"} <= tags["xfs"]
    assert {"boot-sector", "mft-record", "index-block"} <= tags["ntfs"]
    assert {"boot-sector", "fat", "directory"} <= tags["fat32"]
    assert {"superblock", "tree-node"} <= tags["btrfs"]
    assert {"partition-table", "superblock"} <= tags["gpt"]
    assert {"partition-table", "mft-record"} <= tags["mbr"]
    ebrs = [r for r in targets["mbr"].regions if r.note == "EBR"]
    assert len(ebrs) == 2, "the MBR disk's EBR chain is followed"


def test_a_seed_is_the_same_case(targets: dict[str, fs_fuzz.Target]) -> None:
    for target in targets.values():
        assert fs_fuzz.mutate(target, 7) == fs_fuzz.mutate(target, 7)
        assert fs_fuzz.mutate(target, 7) != fs_fuzz.mutate(target, 8)


def test_a_symlink_claiming_four_gib_is_listed_without_filling_the_childs_memory(
        targets: dict[str, fs_fuzz.Target]) -> None:
    """Found by the fuzz: Dissect reads a symlink's target whole, as long as its inode says;
    the child allocated up to its 512 MiB limit and the listing of / failed."""
    target = targets["ext4"]
    [link] = target.tagged("inode-symlink")
    patches = [fs_fuzz.Patch(link.offset + 0x04, struct.pack("<I", 0xFFFFFFFF), "i_size_lo")]
    case = fs_fuzz.Case("ext4", 0, fs_fuzz.describe(patches))
    reader = fs_fuzz.PatchedReader(target.image.path, patches)
    with fs_fuzz.MemoryWatch(case) as watch:
        session = ParserSession(reader, LIMITS, start=watch.start_child)
        try:
            listing = session.list(None, "/", None, 100)
            for child in watch.children:
                watch.note(child)
        finally:
            session.close()
            reader.close()
    [entry] = [e for e in listing["entries"] if e["name"] == "link-to-hello"]
    assert (entry["type"], entry["target"]) == ("symlink", None)
    assert case.memory_peak < 128 << 20, "the child did not read 4 GiB of target"


def test_entries_no_path_can_name_are_left_out_and_a_slash_is_escaped(
        targets: dict[str, fs_fuzz.Target]) -> None:
    """Found by the fuzz: an ext4 entry whose name length is 0 was listed with the name ""
    (and one with a "/" in its name would have been too): a listing, a walk and an archive
    showed what no path reaches. The empty name is left out; the "/" is escaped (U+FFFD
    2F), so that file is listed as one component and stays reachable."""
    target = targets["ext4"]
    [many] = [r for r in target.tagged("directory") if r.note == "/many"]
    # Entries 0 and 1 are "." and ".."; each entry's fields: inode, rec_len, name_len, type.
    name_len = many.fields[2 * 4 + 2][0]
    name = many.fields[3 * 4][0] + 8
    patches = [fs_fuzz.Patch(many.offset + name_len, b"\x00", "name_len 0"),
               fs_fuzz.Patch(many.offset + name, b"/", "a slash in a name")]
    reader = fs_fuzz.PatchedReader(target.image.path, patches)
    session = ParserSession(reader, LIMITS)
    try:
        names = [e["name"] for e in session.list(None, "/many", None, 100)["entries"]]
        walked = [e["path"] for e in session.walk(None, "/many", 100)["entries"]]
    finally:
        session.close()
        reader.close()
    assert len(names) == 25 - 1, "the nameless entry is left out, the others listed"
    assert all(name and "/" not in name for name in names)
    assert sum("\ufffd2F" in name for name in names) == 1
    assert all(path.count("/") == 2 and not path.endswith("/") for path in walked[1:])


@pytest.fixture(scope="module")
def ext2(images: dict[str, Image], tmp_path_factory: pytest.TempPathFactory) -> fs_fuzz.Target:
    """An ext2 image of the same tree: files mapped by indirect blocks, not extents."""
    path = tmp_path_factory.mktemp("ext2") / "ext2.img"
    with path.open("wb") as out:
        out.truncate(24 << 20)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext2", "-d", str(images["ext4"].tree.root),
                    str(path)], check=True, capture_output=True)
    return fs_fuzz.metadata("ext4", Image(path, images["ext4"].tree, "ext2"))


def test_an_indirect_block_map_of_a_huge_size_is_read_without_filling_memory(
        ext2: fs_fuzz.Target) -> None:
    """Found by the fuzz: an ext2/3 file or directory (block map, no extents) whose size says
    2^48 bytes had Dissect list every block of it, holes too: the child ran out of its
    512 MiB. Its own runs are read now, holes costing nothing; the bytes still read."""
    [big] = [r for r in ext2.tagged("inode") if r.note == "/big.bin"]
    [docs] = [r for r in ext2.tagged("inode-dir") if r.note == "/docs"]
    patches = [fs_fuzz.Patch(region.offset + 0x6C, struct.pack("<I", 0xFFFF), "i_size_high")
               for region in (big, docs)]
    case = fs_fuzz.Case("ext2", 0, fs_fuzz.describe(patches))
    reader = fs_fuzz.PatchedReader(ext2.image.path, patches)
    with fs_fuzz.MemoryWatch(case) as watch:
        session = ParserSession(reader, LIMITS, start=watch.start_child)
        try:
            runs = session.runs(None, "/big.bin", 1024)
            head = session.read(None, "/big.bin", 0, 1 << 20)
            listing = session.list(None, "/docs", None, 100)
            for child in watch.children:
                watch.note(child)
        finally:
            session.close()
            reader.close()
    assert runs is not None
    assert runs["size"] == 0xFFFF << 32 | ext2.image.tree.sizes["/big.bin"]
    assert runs["runs"][-1][0] is None, "past its blocks the file is a hole"
    source = (ext2.image.tree.root / "big.bin").read_bytes()
    assert head == source[:1 << 20]
    assert {e["name"] for e in listing["entries"]} == {"readme.md", "deep"}
    assert case.memory_peak < 128 << 20


def test_every_file_of_an_ext2_image_reads_as_its_source_through_its_block_map(
        ext2: fs_fuzz.Target) -> None:
    tree = ext2.image.tree
    with ext2.image.path.open("rb") as fh:
        ops = Operations(fh, ext2.size)
        for path, sha in tree.files.items():
            shown = "/".join(display_name(part) for part in path.split("/"))
            size = tree.sizes[path]
            data = b"".join(ops.read(None, shown, at, MAX_READ) for at in range(0, size, MAX_READ))
            assert hashlib.sha256(data).hexdigest() == sha, path
            runs = ops.runs(None, shown, 10_000)
            assert runs is not None
            pieces = []
            for offset, length in runs["runs"]:
                fh.seek(offset or 0)
                pieces.append(bytes(length) if offset is None else fh.read(length))
            assert hashlib.sha256(b"".join(pieces)).hexdigest() == sha, path


def test_an_xfs_directory_of_a_huge_size_lists_its_blocks_not_its_holes(
        targets: dict[str, fs_fuzz.Target]) -> None:
    """Found by the fuzz: Dissect visits every block an XFS directory's size spans, holes
    too: a size of 2^62 listed until the call's deadline (10 s, ParserLimitExceeded)."""
    target = targets["xfs"]
    [many] = [r for r in target.tagged("inode-dir") if r.note == "/many"]
    patches = [fs_fuzz.Patch(many.offset + 0x38, (1 << 62).to_bytes(8, "big"), "di_size")]
    reader = fs_fuzz.PatchedReader(target.image.path, patches)
    session = ParserSession(reader, LIMITS)
    try:
        started = time.monotonic()
        listing = session.list(None, "/many", None, 100)
        seconds = time.monotonic() - started
    finally:
        session.close()
        reader.close()
    assert len(listing["entries"]) == 25
    assert seconds < 5


def test_an_ntfs_index_whose_node_points_back_opens_at_once(
        targets: dict[str, fs_fuzz.Target]) -> None:
    """Found by the fuzz: Dissect's NTFS opens by looking up $Secure and $UsnJrnl by path,
    an index search following child links with no bound; the root index's block filled
    with 0xFF from +0xAB points back at itself, and listing the partitions hung until the
    deadline. The parser reads neither file: the open no longer searches."""
    target = targets["ntfs"]
    [index] = target.tagged("index-block")
    patches = [fs_fuzz.Patch(index.offset + 0xAB, b"\xff" * 255, "0xFF over index entries")]
    reader = fs_fuzz.PatchedReader(target.image.path, patches)
    session = ParserSession(reader, LIMITS)
    try:
        started = time.monotonic()
        [partition] = session.partitions()
        seconds = time.monotonic() - started
    finally:
        session.close()
        reader.close()
    assert (partition["filesystem"], partition["readable"]) == ("ntfs", True)
    assert seconds < 5


def test_an_unused_gpt_entry_is_no_partition_whatever_its_lbas(
        targets: dict[str, fs_fuzz.Target]) -> None:
    """Found by the fuzz: a bit flipped in an unused GPT entry's first LBA (its type GUID
    all zeros) listed a partition 4, "Unused entry", outside the disk."""
    target = targets["gpt"]
    [entries] = [r for r in target.tagged("partition-table") if r.note == "GPT entries"]
    patches = [fs_fuzz.Patch(entries.offset + 3 * 128 + 0x23, b"\x10", "entry 4's first LBA")]
    reader = fs_fuzz.PatchedReader(target.image.path, patches)
    session = ParserSession(reader, LIMITS)
    try:
        partitions = session.partitions()
    finally:
        session.close()
        reader.close()
    assert [p["index"] for p in partitions] == [1, 2]


@pytest.mark.parametrize("patch", ["no items", "its own child"])
def test_a_btrfs_tree_node_empty_or_its_own_child_is_damage_not_a_hang(
        targets: dict[str, fs_fuzz.Target], patch: str) -> None:
    """Found by the fuzz: Dissect's B-tree search loops for ever over a node of 0 items, and
    descends for ever into a node whose child pointer names itself."""
    target = targets["btrfs"]
    nodes = [r for r in target.tagged("tree-node") if r.note.startswith("level 1,")]
    assert nodes, "the image has an inner tree node"
    node = nodes[0]
    patches = ([fs_fuzz.Patch(node.offset + 0x60, bytes(4), "nritems 0")] if patch == "no items"
               else [fs_fuzz.Patch(node.offset + 0x65 + 17 + 33 * i,
                                   (node.offset).to_bytes(8, "little"), "blockptr to itself")
                     for i in range(2)])
    reader = fs_fuzz.PatchedReader(target.image.path, patches)
    session = ParserSession(reader, LIMITS)
    started = time.monotonic()
    try:
        [partition] = session.partitions()
        if partition["readable"]:  # the node is below the filesystem's root: a listing's
            with pytest.raises(FilesUnreadable, match="damaged B-tree node"):
                session.list(None, "/", None, 100)
        else:  # the node is one the open reads
            assert "damaged B-tree node" in partition["reason"]
    finally:
        session.close()
        reader.close()
    assert time.monotonic() - started < 5
