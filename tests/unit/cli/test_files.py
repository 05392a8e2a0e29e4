"""`cairn restore-point files`: the CLI over the file routes of the API, against a stand-in
for keystoneauth's session (the requests it was sent, the answers it gives), through
`cli.main.main` as a shell runs it: its exit codes and messages, the files it writes."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli import progress
from tests.unit.cli.standin import Answer, FakeSession, Sent, answer, cairn, error

RP = "3f2b8c1e-5d6a-4e7f-8a9b-0c1d2e3f4a5b"
VOLUME = "9a8b7c6d-1e2f-4a5b-8c7d-6e5f4a3b2c1d"
BASE = f"/v1/restore-points/{RP}"
PAYLOAD = bytes(range(256)) * 4096 + b"tail"


def entry(name: str, kind: str = "file", size: int = 10, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "size": size, "mode": 0o100644 if kind == "file"
            else 0o40755, "uid": 0, "gid": 0, "mtime": "2026-11-27T06:00:00Z",
            "target": None, **extra}


@pytest.fixture
def cwd(tmp_path: Path) -> Iterator[Path]:
    before = Path.cwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(before)


def content(params: dict[str, Any]) -> Answer:
    return 200, {"Content-Type": "application/octet-stream",
                 "Content-Length": str(len(PAYLOAD))}, PAYLOAD


def test_ls_all_follows_the_markers_to_the_last_page(session: FakeSession) -> None:
    pages = {None: ([entry("a"), entry("b", "dir")], "b"), "b": ([entry("c")], None)}

    def files(params: dict[str, Any]) -> Answer:
        entries, marker = pages[params.get("marker")]
        return answer(200, {"path": "/etc", "partition": 1, "entries": entries,
                            "next_marker": marker})
    session.routes[f"{BASE}/files"] = files

    every = cairn("restore-point", "files", "ls", RP, "/etc", "--all", "-f", "json")
    assert every.code == 0, every.err
    assert [e["name"] for e in json.loads(every.out)["entries"]] == ["a", "b", "c"]
    assert [s.params.get("marker") for s in session.sent] == [None, "b"]
    assert session.sent[0].params == {"path": "/etc", "limit": 100}

    one = cairn("restore-point", "files", "ls", RP, "/etc", "--partition", "2")
    assert one.code == 0, one.err
    assert "drwxr-xr-x" in one.out.decode()
    assert "| b " in one.out.decode()
    assert " c " not in one.out.decode()
    assert "more entries: --marker b for the next page, or --all" in one.err
    assert session.sent[-1].params["partition"] == 2


def test_get_streams_a_file_to_its_base_name_and_never_overwrites_unasked(
        session: FakeSession, cwd: Path) -> None:
    session.routes[f"{BASE}/files/content"] = content

    done = cairn("restore-point", "files", "get", RP, "/etc/nginx/nginx.conf")
    assert done.code == 0, done.err
    assert (cwd / "nginx.conf").read_bytes() == PAYLOAD
    assert session.sent[-1] == Sent("GET", f"{BASE}/files/content",
                                    {"path": "/etc/nginx/nginx.conf"}, True)
    assert f"nginx.conf: {len(PAYLOAD)} bytes" in done.err

    (cwd / "nginx.conf").write_bytes(b"mine")
    refused = cairn("restore-point", "files", "get", RP, "/etc/nginx/nginx.conf")
    assert refused.code == 1
    assert "nginx.conf exists: --force to replace it" in refused.err
    assert (cwd / "nginx.conf").read_bytes() == b"mine"
    assert len(session.sent) == 1  # refused before asking the API anything

    forced = cairn("restore-point", "files", "get", RP, "/etc/nginx/nginx.conf", "--force",
                   "-o", str(cwd / "nginx.conf"))
    assert forced.code == 0, forced.err
    assert (cwd / "nginx.conf").read_bytes() == PAYLOAD
    assert sorted(p.name for p in cwd.iterdir()) == ["nginx.conf"]  # no .part left


def test_get_to_stdout_writes_the_bytes_only(session: FakeSession, cwd: Path) -> None:
    session.routes[f"{BASE}/files/content"] = content
    done = cairn("restore-point", "files", "get", RP, "/etc/passwd", "-o", "-")
    assert done.code == 0, done.err
    assert done.out == PAYLOAD
    assert list(cwd.iterdir()) == []


def test_a_download_that_comes_short_fails_and_leaves_no_file(
        session: FakeSession, cwd: Path) -> None:
    session.routes[f"{BASE}/files/content"] = lambda params: (
        200, {"Content-Length": str(len(PAYLOAD) + 1)}, PAYLOAD)
    done = cairn("restore-point", "files", "get", RP, "/big.img")
    assert done.code == 1
    assert f"the download ended after {len(PAYLOAD)} of {len(PAYLOAD) + 1} bytes" in done.err
    assert list(cwd.iterdir()) == []


def test_several_paths_or_a_directory_need_an_archive(session: FakeSession, cwd: Path) -> None:
    usage = cairn("restore-point", "files", "get", RP, "/etc/hosts", "/etc/fstab")
    assert usage.code == 2
    assert "add --archive tar or --archive zip" in usage.err
    assert session.sent == []

    session.routes[f"{BASE}/files/content"] = lambda params: error(
        422, "is_a_directory", "/etc is a directory")
    directory = cairn("restore-point", "files", "get", RP, "/etc")
    assert directory.code == 1
    assert "cairn: /etc is a directory: add --archive tar or --archive zip" in directory.err
    assert list(cwd.iterdir()) == []

    session.routes[f"{BASE}/files/archive"] = lambda params: (200, {}, b"PK\x03\x04zip")
    zipped = cairn("restore-point", "files", "get", RP, "/etc/hosts", "/etc/fstab",
                   "--archive", "zip")
    assert zipped.code == 0, zipped.err
    assert session.sent[-1].params == {"path": ["/etc/hosts", "/etc/fstab"], "format": "zip"}
    assert (cwd / f"restore-point-{RP[:8]}.zip").read_bytes() == b"PK\x03\x04zip"
    tarred = cairn("restore-point", "files", "get", RP, "/etc/", "--archive", "tar")
    assert tarred.code == 0, tarred.err
    assert (cwd / "etc.tar").exists()


@pytest.mark.parametrize(("answered", "said"), [
    (error(404, "path_not_found", "/nope: no such file or directory"),
     "cairn: /nope: no such file or directory\n"),
    (error(409, "restore_point_damaged", "block 7 of object x failed its checksum"),
     "cairn: block 7 of object x failed its checksum\n"),
    (error(429, "too_many_requests", "4 file requests of this project already run",
           **{"Retry-After": "3"}),
     "cairn: 4 file requests of this project already run (try again in 3 s)\n"),
    (error(503, "file_service_unavailable", "the file service is busy"),
     "cairn: the file service is busy (try again later)\n"),
])
def test_refusals_print_the_apis_message_and_exit_1(
        session: FakeSession, cwd: Path, answered: Answer, said: str) -> None:
    session.routes[f"{BASE}/files/content"] = lambda params: answered
    session.routes[f"{BASE}/files/stat"] = lambda params: answered
    for command in (["get", RP, "/nope"], ["stat", RP, "/nope"]):
        done = cairn("restore-point", "files", *command)
        assert (done.code, done.err) == (1, said)
    assert list(cwd.iterdir()) == []


def test_versions_and_search_ask_their_routes(session: FakeSession) -> None:
    session.routes[f"/v1/volumes/{VOLUME}/file-versions"] = lambda params: answer(200, {
        "path": params["path"], "versions": [
            {"restore_point_id": RP, "present": True, "type": "file", "size": 4,
             "mtime": "2026-11-27T06:00:00Z", "sha256": "ab" * 32, "reason": None},
            {"restore_point_id": "older", "present": False, "type": None, "size": None,
             "mtime": None, "sha256": None, "reason": "no such file"}]})
    versions = cairn("restore-point", "files", "versions", "/etc/hosts", "--volume", VOLUME,
                     "--limit", "5")
    assert versions.code == 0, versions.err
    assert session.sent[-1].params == {"path": "/etc/hosts", "limit": 5}
    assert "abababababababab " in versions.out.decode()
    assert "no such file" in versions.out.decode()

    session.routes[f"{BASE}/files/search"] = lambda params: answer(200, {
        "entries": [{**entry("app.conf"), "path": "/etc/app.conf"}], "truncated": True,
        "visited": 5000})
    found = cairn("restore-point", "files", "search", RP, "*.conf", "--path", "/etc")
    assert found.code == 0, found.err
    assert session.sent[-1].params == {"pattern": "*.conf", "path": "/etc", "limit": 100}
    assert "/etc/app.conf" in found.out.decode()
    assert "the search stopped early (5000 entries looked at)" in found.err


def test_names_from_the_filesystem_reach_the_terminal_escaped(session: FakeSession) -> None:
    session.routes[f"{BASE}/files"] = lambda params: answer(200, {
        "path": "/", "partition": 1, "entries": [entry("evil\x1b]0;owned\x07")],
        "next_marker": "evil\x1b[2J"})
    done = cairn("restore-point", "files", "ls", RP)
    assert done.code == 0, done.err
    assert b"\x1b" not in done.out
    assert "\x1b" not in done.err
    assert "evil\\x1b]0;owned\\x07" in done.out.decode()


def test_the_download_bar_shows_the_share_when_the_size_is_known() -> None:
    now = [0.0]
    out = io.StringIO()
    bar = progress.Transfer("disk.img", 4 << 20, out=out, clock=lambda: now[0])
    now[0] = 1.0
    bar.add(1 << 20)
    assert out.getvalue() == "\rdisk.img [#######.......................]  25.0%" \
        "       1.0 MiB     1.0 MiB/s"
    streamed = progress.Transfer("etc.tar", None, out=io.StringIO(), clock=lambda: 2.0)
    streamed.add(3 << 20)
    assert "%" not in streamed.line(2.0)
    assert "3.0 MiB" in streamed.line(2.0)
