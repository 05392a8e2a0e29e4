"""Archives of a fake tree, written without seeking as the service streams them, then read
back by Python's own tarfile and zipfile: every name safe, every byte there."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from services.errors import FilesUnreadable, ParserLimitExceeded
from worker.files import archive
from worker.files.archive import Member, archive_name, members


@pytest.mark.parametrize(("path", "base", "name"), [
    ("/etc/nginx", "/etc/nginx", "nginx"),
    ("/etc/nginx/nginx.conf", "/etc/nginx", "nginx/nginx.conf"),
    ("/etc/nginx/nginx.conf", "/etc/nginx/", "nginx/nginx.conf"),
    ("/etc/passwd", "/", "etc/passwd"),
    ("/", "/", None),                       # the root has no name of its own
    ("/etc/nginx2/x", "/etc/nginx", None),  # not under the path asked for
    ("/etc/../../x", "/etc", None),         # a `..` the child should never have sent
    ("/etc/a\0b", "/etc", None),
    ("/etc//./x", "/etc", "etc/x"),
])
def test_names_are_relative_and_safe(path: str, base: str, name: str | None) -> None:
    assert archive_name(path, base) == name


def _entry(path: str, kind: str, size: int = 0, **more: Any) -> dict[str, Any]:
    return {"path": path, "name": path.rsplit("/", 1)[-1], "type": kind, "size": size,
            "mode": 0o640 if kind == "file" else 0o755, "uid": 1000, "gid": 100,
            "mtime": "2026-11-27T06:00:00.123456Z", "target": None, **more}


MTIME = datetime(2026, 11, 27, 6, 0, 0, 123456, tzinfo=UTC).timestamp()

DATA = {"/srv/www/index.html": b"<h1>hello</h1>\n",
        "/srv/www/big.bin": bytes(range(256)) * 5000,
        "/srv/www/empty": b"",
        "/srv/www/Übersicht.txt": "schön\n".encode(),
        "/etc/hosts": b"127.0.0.1 localhost\n",
        "/srv/www/sub/..\\..\\win": b""}

WALKS = [
    ("/srv/www", [
        _entry("/srv/www", "dir"),
        _entry("/srv/www/index.html", "file", len(DATA["/srv/www/index.html"])),
        _entry("/srv/www/big.bin", "file", len(DATA["/srv/www/big.bin"])),
        _entry("/srv/www/empty", "file", 0),
        _entry("/srv/www/Übersicht.txt", "file", len(DATA["/srv/www/Übersicht.txt"])),
        _entry("/srv/www/sub", "dir"),
        _entry("/srv/www/sub/link", "symlink", target="../index.html"),
        _entry("/srv/www/sub/out", "symlink", target="../../../etc/shadow"),
        _entry("/srv/www/sub/abs", "symlink", target="/etc/shadow"),
        _entry("/srv/www/sub/fifo", "other"),
        _entry("/srv/www/sub/..\\..\\win", "file", 0),
    ]),
    ("/etc/hosts", [_entry("/etc/hosts", "file", len(DATA["/etc/hosts"]))]),
]


@contextmanager
def _contents(member: Member) -> Iterator[Iterator[bytes]]:
    data = DATA.get(member.path, b"")
    # In uneven pieces, as a reader's blocks would come.
    yield iter([data[i:i + 7000] for i in range(0, len(data), 7000)])


class Unseekable:
    """What the service writes to: write and flush, no tell, no seek."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()

    def write(self, data: bytes) -> int:
        return self.buffer.write(data)

    def flush(self) -> None:
        pass


def _written(fmt: archive.Format) -> bytes:
    out = Unseekable()
    chosen = members(WALKS, fmt, max_entries=100, max_bytes=1 << 30)
    (archive.write_tar if fmt == "tar" else archive.write_zip)(chosen, out, _contents)
    return out.buffer.getvalue()


def test_a_tar_holds_the_tree_with_safe_names_and_links() -> None:
    with tarfile.open(fileobj=io.BytesIO(_written("tar"))) as tar:
        found = {m.name: m for m in tar.getmembers()}
        assert set(found) == {"www", "www/index.html", "www/big.bin", "www/empty",
                              "www/Übersicht.txt", "www/sub", "www/sub/link",
                              "www/sub/..\\..\\win", "hosts"}
        for name, member in found.items():
            assert not name.startswith("/")
            assert ".." not in name.split("/")
            if member.isfile():
                path = ("/etc/" if name == "hosts" else "/srv/") + name
                extracted = tar.extractfile(member)
                assert extracted is not None
                assert extracted.read() == DATA[path], name
                assert member.mode == 0o640
                assert (member.uid, member.gid) == (1000, 100)
                assert member.mtime == pytest.approx(MTIME)
        assert found["www"].isdir()
        assert found["www/sub/link"].issym()
        assert found["www/sub/link"].linkname == "../index.html"


def test_a_zip_holds_the_tree_without_links_and_with_windows_safe_names() -> None:
    with zipfile.ZipFile(io.BytesIO(_written("zip"))) as archive_:
        assert archive_.testzip() is None  # every CRC checks
        names = archive_.namelist()
        assert set(names) == {"www/", "www/index.html", "www/big.bin", "www/empty",
                              "www/Übersicht.txt", "www/sub/", "www/sub/.._.._win", "hosts"}
        for name in names:
            if not name.endswith("/"):
                path = ("/etc/" if name == "hosts" else "/srv/") + name
                assert archive_.read(name) == DATA.get(path, b""), name
        info = archive_.getinfo("www/big.bin")
        assert info.flag_bits & 0x08  # sizes in a data descriptor: written without seeking
        assert info.date_time == (2026, 11, 27, 6, 0, 0)
        assert (info.external_attr >> 16) & 0o7777 == 0o640


def test_a_zip_past_zips_small_limits_uses_zip64(monkeypatch: pytest.MonkeyPatch) -> None:
    # The limits lowered (4 GiB and 65 535 entries would take seconds to pass): a member
    # larger than the size limit and more entries than the count limit, read back.
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 100_000)
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 5)
    data = _written("zip")
    assert b"PK\x06\x06" in data  # the ZIP64 end of central directory record
    with zipfile.ZipFile(io.BytesIO(data)) as archive_:
        assert archive_.read("www/big.bin") == DATA["/srv/www/big.bin"]
        assert len(archive_.namelist()) == 8


@pytest.mark.parametrize(("max_entries", "max_bytes", "limit"), [
    (3, 1 << 30, "entries"), (100, 1000, "bytes")])
def test_an_archive_over_its_bounds_is_refused(max_entries: int, max_bytes: int,
                                               limit: str) -> None:
    with pytest.raises(ParserLimitExceeded) as raised:
        members(WALKS, "tar", max_entries=max_entries, max_bytes=max_bytes)
    assert raised.value.details["limit"] == limit


@pytest.mark.parametrize("fmt", ["tar", "zip"])
def test_a_file_shorter_than_its_size_fails_the_archive(fmt: archive.Format) -> None:
    chosen = [Member("x", "/x", "file", 10, 0o644, 0, 0, 0.0, "")]

    @contextmanager
    def short(member: Member) -> Iterator[Iterator[bytes]]:
        yield iter([b"12345"])

    with pytest.raises((FilesUnreadable, OSError)):
        (archive.write_tar if fmt == "tar" else archive.write_zip)(chosen, Unseekable(), short)


def test_two_paths_with_the_same_last_name_are_both_kept_the_later_suffixed() -> None:
    walks = [("/a/x", [_entry("/a/x", "dir"), _entry("/a/x/f", "file", 1)]),
             ("/b/x", [_entry("/b/x", "dir"), _entry("/b/x/f", "file", 2)]),
             ("/c/x.txt", [_entry("/c/x.txt", "file", 3)]),
             ("/d/x.txt", [_entry("/d/x.txt", "file", 4)]),
             ("/e/.rc", [_entry("/e/.rc", "file", 5)]),
             ("/f/.rc", [_entry("/f/.rc", "file", 6)])]
    chosen = members(walks, "tar", max_entries=20, max_bytes=100)
    assert [(m.name, m.path) for m in chosen] == [
        ("x", "/a/x"), ("x/f", "/a/x/f"), ("x (2)", "/b/x"), ("x (2)/f", "/b/x/f"),
        ("x.txt", "/c/x.txt"), ("x (2).txt", "/d/x.txt"), (".rc", "/e/.rc"),
        (".rc (2)", "/f/.rc")]


def test_names_zip_rewrites_to_one_are_both_kept() -> None:
    walks = [("/d", [_entry("/d", "dir"), _entry("/d/a:b", "dir"),
                     _entry("/d/a:b/one", "file", 1), _entry("/d/a_b", "dir"),
                     _entry("/d/a_b/two", "file", 2), _entry("/d/\udce9", "file", 3),
                     _entry("/d/\udcea", "file", 4)])]
    chosen = members(walks, "zip", max_entries=20, max_bytes=100)
    assert [(m.name, m.path) for m in chosen] == [
        ("d", "/d"), ("d/a_b", "/d/a:b"), ("d/a_b/one", "/d/a:b/one"),
        ("d/a_b (2)", "/d/a_b"), ("d/a_b (2)/two", "/d/a_b/two"),
        ("d/\ufffd", "/d/\udce9"), ("d/\ufffd (2)", "/d/\udcea")]


def _below_a_link(chosen: list[Member]) -> list[str]:
    links = {m.name for m in chosen if m.type == "symlink"}
    return [m.name for m in chosen
            if any(m.name.startswith(link + "/") for link in links)]


def test_no_member_lies_under_a_link_when_two_paths_share_a_name() -> None:
    # The tenant asks for /home/a/x (a link a VM made: -> /root/.ssh) and /srv/x (a
    # directory): the directory's "x" is skipped as a name seen, its children are not.
    walks = [("/home/a/x", [_entry("/home/a/x", "symlink", 0, target="/root/.ssh")]),
             ("/srv/x", [_entry("/srv/x", "dir", 0),
                         _entry("/srv/x/authorized_keys", "file", 3)])]
    chosen = members(walks, "tar", max_entries=10, max_bytes=10)
    assert _below_a_link(chosen) == []


def test_no_member_lies_under_a_link_when_a_name_holds_a_slash() -> None:
    # A crafted ext4 directory /d: "x" a symlink to /etc, and "x/passwd" one entry's name
    # (display_name keeps the '/'), so the walk answers the path /d/x/passwd.
    walks = [("/d", [_entry("/d", "dir", 0),
                     _entry("/d/x", "symlink", 0, target="/etc"),
                     _entry("/d/x/passwd", "file", 3)])]
    chosen = members(walks, "tar", max_entries=10, max_bytes=10)
    assert _below_a_link(chosen) == []


@pytest.mark.parametrize("fmt", ["tar", "zip"])
def test_nothing_is_kept_below_a_name_left_out_a_link_or_a_file(fmt: archive.Format) -> None:
    # What a taken-over parser could answer: entries under a link (kept in tar: its target
    # is inside), a device, a file, a duplicate that was a file first, a `..`.
    walks = [("/d", [_entry("/d", "dir"),
                     _entry("/d/link", "symlink", target="sub"),
                     _entry("/d/link/a", "file", 1),
                     _entry("/d/dev", "other"), _entry("/d/dev/b", "file", 1),
                     _entry("/d/f", "file", 1), _entry("/d/f/c", "file", 1),
                     _entry("/d/twice", "file", 1), _entry("/d/twice", "dir"),
                     _entry("/d/twice/e", "file", 1),
                     _entry("/d/../g", "dir"), _entry("/d/../g/h", "file", 1),
                     _entry("/d/sub", "dir"), _entry("/d/sub/ok", "file", 1)])]
    chosen = members(walks, fmt, max_entries=20, max_bytes=100)
    kept = ["d", "d/link", "d/f", "d/twice", "d/sub", "d/sub/ok"]
    assert [m.name for m in chosen] == [n for n in kept if fmt == "tar" or n != "d/link"]


@pytest.mark.parametrize(("link", "target", "kept"), [
    ("/d/l", "sub/x", True), ("/d/l", "../d/x", True), ("/d/a/l", "../../d", True),
    ("/d/l", "..", True), ("/d/l", "../..", False), ("/d/l", "/etc", False),
    ("/d/a/l", "../../../x", False), ("/d/l", "", False), ("/d/l", "./../../x", False)])
def test_a_link_is_kept_only_when_its_target_stays_in_the_archive(link: str, target: str,
                                                                 kept: bool) -> None:
    walks = [("/d", [_entry("/d", "dir"), _entry("/d/a", "dir"),
                     _entry(link, "symlink", target=target)])]
    chosen = members(walks, "tar", max_entries=10, max_bytes=10)
    assert any(m.type == "symlink" for m in chosen) is kept
