"""The operations' own logic (worker/files/parser/ops.py) over a made-up filesystem: paging,
lookups by listed name, symlinks never followed, bounds, cycles. The real filesystems are
the tools tier's (tests/tools/worker/files/test_operations.py)."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pytest

from worker.files.parser.errors import Encrypted, IsDir, Limit, NotADir, NotFound, Unreadable
from worker.files.parser.filesystems.base import Filesystem, Info, Node, Run
from worker.files.parser.ops import Operations
from worker.files.parser.volumes import ENCRYPTED, Volume


@dataclass(eq=False)
class Fake:
    number: int
    kind: str = "dir"
    data: bytes = b""
    target: str | None = None
    entries: dict[str, Fake] = field(default_factory=dict)


class FakeFs(Filesystem):
    kind = "fake"

    def __init__(self, root: Fake, runs: list[Run] | None = None) -> None:
        super().__init__(io.BytesIO(), 1 << 30)
        self.top = root
        self.fixed_runs = runs
        self.infos = 0

    @classmethod
    def probe(cls, fh: BinaryIO, size: int) -> bool:
        return False

    @property
    def name(self) -> str:
        return "ext4"

    @property
    def label(self) -> str | None:
        return None

    def root(self) -> Node:
        return self.top

    def children(self, node: Node) -> Iterator[tuple[str, Node]]:
        yield from node.entries.items()

    def identity(self, node: Node) -> Hashable:
        number: Hashable = node.number
        return number

    def info(self, node: Node) -> Info:
        self.infos += 1
        mode = {"dir": stat.S_IFDIR | 0o755, "file": stat.S_IFREG | 0o644,
                "symlink": stat.S_IFLNK | 0o777}[node.kind]
        return Info(type=node.kind, size=len(node.data), mode=mode, uid=0, gid=0,
                    mtime_ns=1_795_759_200_123_456_789, target=node.target)

    def runs(self, node: Node) -> list[Run] | None:
        return self.fixed_runs

    def read_stream(self, node: Node, offset: int, length: int) -> bytes:
        data: bytes = node.data
        return data[offset:offset + length]


def tree() -> Fake:
    many = Fake(3, entries={f"f{i:03d}": Fake(100 + i, "file", b"x" * i) for i in range(250)})
    etc = Fake(2, entries={"passwd": Fake(10, "file", b"root:x:0:0\n"),
                           "link": Fake(11, "symlink", target="passwd")})
    latin1 = os.fsdecode(b"caf\xe9")
    return Fake(1, entries={"etc": etc, "many": many, latin1: Fake(12, "file", b"latin"),
                            "Zebra": Fake(13, "file"), "apple": Fake(14, "file"),
                            "é": Fake(15, "file")})


def operations(fs: Filesystem | None = None, offset: int = 0,
               reason: str | None = None) -> Operations:
    ops = Operations(io.BytesIO(), 0)
    ops._volumes = [Volume(index=3, scheme="gpt", offset=offset, size=1 << 30,
                           filesystem=fs if reason is None else None, reason=reason)]
    return ops


def test_a_listing_is_sorted_bytewise_and_names_what_a_user_sees() -> None:
    listing = operations(FakeFs(tree())).list(None, "/", None, 100)
    assert [e["name"] for e in listing["entries"]] == [
        "Zebra", "apple", "caf\ufffdE9", "etc", "many", "é"]
    assert listing["partition"] == 3
    assert listing["next_marker"] is None
    link = operations(FakeFs(tree())).stat(3, "/etc/link")
    assert (link["type"], link["target"], link["path"]) == ("symlink", "passwd", "/etc/link")
    assert link["mtime"] == "2026-11-27T06:00:00.123456Z"


def test_pages_follow_each_other_without_gaps_or_repeats_and_read_only_their_inodes() -> None:
    fs = FakeFs(tree())
    ops = operations(fs)
    names, marker = [], None
    while True:
        fs.infos = 0
        page = ops.list(None, "/many", marker, 100)
        assert fs.infos <= 100 + 3  # the page's entries, /many and / (not all 250)
        names += [e["name"] for e in page["entries"]]
        marker = page["next_marker"]
        if marker is None:
            break
    assert names == [f"f{i:03d}" for i in range(250)]


def test_a_marker_between_names_starts_at_the_next_one() -> None:
    page = operations(FakeFs(tree())).list(None, "/many", "f0995", 2)
    assert [e["name"] for e in page["entries"]] == ["f100", "f101"]


def test_a_listed_non_utf8_name_can_be_looked_up() -> None:
    ops = operations(FakeFs(tree()))
    assert ops.read(None, "/caf\ufffdE9", 0, 100) == b"latin"


def test_symlinks_are_never_followed() -> None:
    ops = operations(FakeFs(tree()))
    with pytest.raises(IsDir, match="symlink"):
        ops.read(None, "/etc/link", 0, 10)
    with pytest.raises(NotADir, match="symlink"):
        ops.list(None, "/etc/link", None, 10)


def test_a_path_through_a_file_or_to_nothing_is_refused() -> None:
    ops = operations(FakeFs(tree()))
    with pytest.raises(NotADir):
        ops.stat(None, "/etc/passwd/x")
    with pytest.raises(NotFound):
        ops.stat(None, "/etc/shadow")
    with pytest.raises(NotFound):
        ops.stat(None, "/etc/../etc/passwd")
    with pytest.raises(IsDir):
        ops.read(None, "/etc", 0, 1)
    with pytest.raises(NotFound):
        ops.list(7, "/", None, 10)


def test_a_read_is_bounded_and_ends_at_the_file_end() -> None:
    ops = operations(FakeFs(tree()))
    with pytest.raises(Limit):
        ops.read(None, "/etc/passwd", 0, (4 << 20) + 1)
    assert ops.read(None, "/etc/passwd", 5, 100) == b"x:0:0\n"
    assert ops.read(None, "/etc/passwd", 1000, 100) == b""


def test_runs_are_disk_offsets_the_partition_offset_included() -> None:
    ops = operations(FakeFs(tree(), runs=[(4096, 6), (None, 5)]), offset=1 << 20)
    assert ops.runs(None, "/etc/passwd", 10) == {
        "size": 11, "runs": [[(1 << 20) + 4096, 6], [None, 5]]}
    assert ops.runs(None, "/etc/passwd", 1) is None  # too many: read() instead


def test_a_search_stops_at_its_bounds_and_says_so() -> None:
    ops = operations(FakeFs(tree()))
    found = ops.search(None, "/", "f1*", 1000, 100_000)
    assert len(found["entries"]) == 100
    assert not found["truncated"]
    assert found["entries"][0]["path"] == "/many/f100"
    assert ops.search(None, "/", "f1*", 5, 100_000)["truncated"]
    bounded = ops.search(None, "/", "*", 1000, 20)
    assert bounded["visited"] == 20
    assert bounded["truncated"]


def test_a_walk_lists_parents_before_children_and_enters_a_cycle_once() -> None:
    root = tree()
    root.entries["etc"].entries["loop"] = root  # a crafted directory pointing up
    ops = operations(FakeFs(root))
    walked = ops.walk(None, "/etc", 1000)
    paths = [e["path"] for e in walked["entries"]]
    assert paths[:3] == ["/etc", "/etc/link", "/etc/loop"]
    assert paths.count("/etc/loop/etc") == 1
    assert "/etc/loop/etc/loop/etc" not in paths
    assert not walked["truncated"]
    assert ops.walk(None, "/", 10)["truncated"]


def test_an_unreadable_or_encrypted_partition_is_refused_with_its_reason() -> None:
    with pytest.raises(Encrypted):
        operations(reason=ENCRYPTED).list(None, "/", None, 10)
    with pytest.raises(Unreadable, match="no filesystem"):
        operations(reason="no filesystem Cairn can read").list(3, "/", None, 10)


def test_a_library_error_on_damaged_bytes_is_unreadable() -> None:
    class Broken(FakeFs):
        def children(self, node: Any) -> Iterator[tuple[str, Any]]:
            raise ValueError("bad magic")
            yield  # pragma: no cover

    with pytest.raises(Unreadable, match="bad magic"):
        operations(Broken(tree())).list(None, "/", None, 10)
