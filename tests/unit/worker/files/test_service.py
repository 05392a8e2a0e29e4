"""The file service's table of open restore points, its bounds, downloads off the reader
and versions, over a fake restore point (tests/unit/worker/files/fakes.py)."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pytest

from services.errors import (
    FileServiceUnavailable,
    FilesUnreadable,
    IsADirectory,
    ParserLimitExceeded,
    PathNotFound,
    RestorePointDamaged,
    RestorePointNotFound,
    TooManyRequests,
)
from services.status import RestorePointStatus
from tests.unit.worker.files.fakes import FakeCalls, FakeFs, FakePoints, FakeReader
from worker.files.headers import RangeNotSatisfiable
from worker.files.open_points import Opened, SessionTable
from worker.files.service import FileLimits, FileService


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _table(points: FakePoints, clock: Clock, capacity: int = 2) -> SessionTable:
    return SessionTable(points, capacity=capacity, idle_seconds=60, clock=clock)


def _closed(opened: Opened) -> bool:
    assert isinstance(opened.calls, FakeCalls)
    assert isinstance(opened.reader, FakeReader)
    return opened.calls.closed and opened.reader.closed


def test_a_restore_point_is_opened_once_and_closed_when_idle() -> None:
    points, clock = FakePoints(), Clock()
    table = _table(points, clock)
    for _ in range(3):
        with table.using("a") as opened:
            assert opened is points.opened[0]
    assert points.openings == ["a"]
    clock.now += 59
    table.reap()
    assert table.open_ids() == ["a"]
    clock.now += 1
    table.reap()
    assert table.open_ids() == []
    assert _closed(points.opened[0])


def test_the_least_recently_used_idle_one_makes_room_and_a_busy_table_refuses() -> None:
    points, clock = FakePoints(), Clock()
    table = _table(points, clock)
    with table.using("a"):
        pass
    with table.using("b"):
        pass
    with table.using("a"):  # a is now the more recent
        pass
    with table.using("c"):
        assert table.open_ids() == ["a", "c"]
        # Both open ones in use: a fourth is refused at once, never waited for.
        with table.using("a"), pytest.raises(FileServiceUnavailable), table.using("d"):
            pass
    assert points.openings == ["a", "b", "c"]
    assert isinstance(points.opened[1].calls, FakeCalls)
    assert points.opened[1].calls.closed  # b's


def test_a_restore_point_in_use_is_never_closed_under_its_reader() -> None:
    points, clock = FakePoints(), Clock()
    table = _table(points, clock, capacity=1)
    with table.using("a") as opened:
        clock.now += 3600
        table.reap()
        table.discard("a")  # e.g. found deleted: closed when its user ends
        assert not opened.reader.closed  # type: ignore[attr-defined]
    assert opened.reader.closed  # type: ignore[attr-defined]


def test_requests_racing_for_one_restore_point_open_it_once() -> None:
    points, clock = FakePoints(), Clock()
    started, release = threading.Event(), threading.Event()
    real_open = points.open

    def slow_open(restore_point_id: str) -> object:
        started.set()
        release.wait(5)
        return real_open(restore_point_id)

    points.open = slow_open  # type: ignore[method-assign,assignment]
    table = _table(points, clock)
    seen: list[object] = []

    def use() -> None:
        with table.using("a") as opened:
            seen.append(opened)

    threads = [threading.Thread(target=use) for _ in range(4)]
    for thread in threads:
        thread.start()
    started.wait(5)
    release.set()
    for thread in threads:
        thread.join(5)
    assert points.openings == ["a"]
    assert len(seen) == 4
    assert len(set(map(id, seen))) == 1


def _service(fs: FakeFs, **limits: int) -> tuple[FileService, FakePoints]:
    points = FakePoints(fs)
    return FileService(points, FileLimits(**{"sessions": 4, "per_project": 2,
                                             "project_sessions": 2, **limits})), points


def _tree() -> FakeFs:
    fs = FakeFs()
    fs.add("/etc", "dir")
    fs.add("/etc/hosts", "file", data=b"127.0.0.1 localhost\n" * 3000, hole=5000)
    fs.add("/etc/packed", "file", data=b"compressed data " * 1000, inline=True)
    fs.add("/etc/link", "symlink", target="hosts")
    return fs


def test_a_download_reads_the_runs_off_the_reader_and_a_range_of_them() -> None:
    fs = _tree()
    service, points = _service(fs)
    whole = fs.data("/etc/hosts")
    download = service.download("p", "rp", None, "/etc/hosts")
    assert download.status == 200
    assert b"".join(download.body) == whole
    download.body.close()
    assert download.headers["Content-Length"] == str(len(whole))
    assert download.headers["Content-Disposition"].endswith("filename*=UTF-8''hosts")
    calls = points.opened[0].calls
    assert isinstance(calls, FakeCalls)
    assert "read" not in calls.calls
    reader = points.opened[0].reader
    assert isinstance(reader, FakeReader)
    assert reader.reads
    part = service.download("p", "rp", None, "/etc/hosts", range_header="bytes=-6000")
    assert part.status == 206
    assert b"".join(part.body) == whole[-6000:]  # the end of its data and its hole
    part.body.close()
    size = len(whole)
    assert part.headers["Content-Range"] == f"bytes {size - 6000}-{size - 1}/{size}"
    with pytest.raises(RangeNotSatisfiable):
        service.download("p", "rp", None, "/etc/hosts", range_header=f"bytes={len(whole)}-")
    assert service.slots._running == {}  # every request's slot given back


def test_data_that_is_not_plain_blocks_is_read_through_the_parser() -> None:
    fs = _tree()
    service, points = _service(fs)
    download = service.download("p", "rp", None, "/etc/packed")
    assert b"".join(download.body) == fs.data("/etc/packed")
    download.body.close()
    assert "read" in points.opened[0].calls.calls  # type: ignore[attr-defined]


def test_a_directory_or_a_link_has_no_content() -> None:
    service, _points = _service(_tree())
    with pytest.raises(IsADirectory):
        service.download("p", "rp", None, "/etc")
    with pytest.raises(Exception, match="not a regular file"):
        service.download("p", "rp", None, "/etc/link")


def test_one_project_holds_at_most_its_share_of_requests() -> None:
    service, _points = _service(_tree(), per_project=2)
    first = service.download("p", "rp", None, "/etc/hosts")
    second = service.download("p", "rp2", None, "/etc/hosts")
    with pytest.raises(TooManyRequests):
        service.stat("p", "rp", None, "/etc/hosts")
    assert service.stat("q", "rp", None, "/etc/hosts")["type"] == "file"  # others go on
    first.body.close()
    assert service.stat("p", "rp", None, "/etc/hosts")["type"] == "file"
    second.body.close()


def test_a_restore_point_deleted_while_read_is_404_and_damage_is_409() -> None:
    fs = _tree()
    service, points = _service(fs)
    assert service.stat("p", "rp", None, "/etc/hosts")
    reader = points.opened[0].reader
    assert isinstance(reader, FakeReader)
    reader.corrupt_from = 0
    with pytest.raises(RestorePointDamaged):  # still available: its data is damaged
        service.download("p", "rp", None, "/etc/hosts")
    points.statuses["rp"] = RestorePointStatus.DELETING
    with pytest.raises(RestorePointNotFound, match="deleted while being read"):
        service.download("p", "rp", None, "/etc/hosts")
    assert service.table.open_ids() == []
    with pytest.raises(RestorePointNotFound):
        service.stat("p", "rp", None, "/etc/hosts")


def test_versions_across_restore_points_hash_files_up_to_the_limit() -> None:
    fs = _tree()
    service, _points = _service(fs, hash_max_bytes=20_000, version_threads=3)
    _points.statuses["gone"] = RestorePointStatus.DELETED
    found = service.versions("p", ["a", "b", "gone"], None, "/etc/packed")
    assert [v["restore_point_id"] for v in found["versions"]] == ["a", "b", "gone"]
    a, _b, gone = found["versions"]
    assert a["present"]
    assert a["type"] == "file"
    assert a["sha256"] == hashlib.sha256(fs.data("/etc/packed")).hexdigest()
    assert not gone["present"]
    assert "not found" in gone["reason"]
    big = service.versions("p", ["a"], None, "/etc/hosts")["versions"][0]
    assert big["present"]
    assert big["sha256"] is None
    missing = service.versions("p", ["a"], None, "/etc/nothing")["versions"][0]
    assert (missing["present"], missing["reason"]) == (False, None)


class _HeldStat(FakeCalls):
    """A parser whose stat of /held waits until the test lets it go (a slow restore point:
    an object target, a file hashed for seconds)."""

    waiting = threading.Semaphore(0)
    go = threading.Event()

    def stat(self, partition: int | None, path: str) -> dict[str, Any]:
        if path == "/held":
            _HeldStat.waiting.release()
            _HeldStat.go.wait(10)
            raise PathNotFound(f"{path} not found", path=path)
        return super().stat(partition, path)


def test_one_projects_versions_leave_restore_points_to_the_others() -> None:
    fs = _tree()
    points = FakePoints(fs)
    opened = points.open

    def open_held(restore_point_id: str) -> Opened:
        reader, _calls = opened(restore_point_id)
        return Opened(reader, _HeldStat(fs))

    points.open = open_held  # type: ignore[method-assign]
    defaults = FileLimits()  # 16 sessions, 4 requests a project, 4 threads a versions
    service = FileService(points, defaults)
    share = service.table.project_sessions
    assert share == defaults.sessions // 4
    ids = [[f"p-rp-{request}-{index}" for index in range(60)] for request in range(4)]
    requests = [threading.Thread(target=service.versions, args=("p", rps, None, "/held"))
                for rps in ids]
    for request in requests:
        request.start()
    try:
        for _ in range(share):
            assert _HeldStat.waiting.acquire(timeout=5)
        # The project's other threads wait for its share: no more of its reads start.
        assert not _HeldStat.waiting.acquire(timeout=0.3)
        assert service.table.held("p") == share
        # Another project's first request, on its own restore point:
        assert service.stat("q", "q-rp", None, "/etc/hosts")["type"] == "file"
    finally:
        _HeldStat.go.set()
        for request in requests:
            request.join(30)
    assert service.table.held("p") == 0


def test_the_last_free_restore_points_go_to_a_project_waiting_for_one() -> None:
    points, clock = FakePoints(), Clock()
    table = SessionTable(points, capacity=2, idle_seconds=60, project_sessions=2, clock=clock)
    got: list[str] = []
    with table.using("a", "p"):
        with table.using("b", "q"):
            # Full: a versions thread of r waits for a restore point...
            waiter = threading.Thread(
                target=lambda: got.append(_use(table, "c", "r", wait=5)))
            waiter.start()
            _until(lambda: table._waiting.get("r") == 1)
        # ... and b's end leaves one free: p's next restore point is refused it.
        with pytest.raises(FileServiceUnavailable):
            _use(table, "d", "p")
        waiter.join(5)
    assert got == ["c"]


def _use(table: SessionTable, restore_point_id: str, project: str, wait: float = 0.0) -> str:
    with table.using(restore_point_id, project, wait=wait):
        return restore_point_id


def _until(condition: Any, seconds: float = 5.0) -> None:
    import time
    until = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < until, "the condition never held"
        time.sleep(0.01)


def test_a_stalled_download_is_ended_and_its_restore_point_released() -> None:
    clock = Clock()
    points = FakePoints(_tree())
    service = FileService(points, FileLimits(
        sessions=4, per_project=2, project_sessions=2, download_min_bytes_per_second=1000,
        download_grace_seconds=60, download_max_seconds=3600), clock=clock)
    slow = service.download("p", "rp", None, "/etc/hosts")
    quick = service.download("p", "rp2", None, "/etc/hosts")
    clock.now += 59
    assert service.end_stalled_downloads() == []  # in its grace
    clock.now += 2  # 61 s: the first piece (< 61 000 bytes) is all either has sent
    for _ in range(20):
        next(quick.body, None)  # ... but this one's client reads on
    assert service.end_stalled_downloads() == [slow.body]
    assert service.table.held("p") == 1
    assert next(slow.body, None) is None  # its client sees the end of what it got
    slow.body.close()  # the app closes it again: nothing left to do
    clock.now += 3600
    assert service.end_stalled_downloads() == [quick.body]  # past its longest time
    assert service.table.held("p") == 0


def test_a_file_larger_than_its_volume_is_refused_not_streamed() -> None:
    fs = _tree()
    fs.add("/huge", "file", data=b"x" * 10, hole=1 << 40)  # a crafted size, of holes
    service, _points = _service(fs)
    with pytest.raises(FilesUnreadable, match="more than"):
        service.download("p", "rp", None, "/huge")
    version = service.versions("p", ["rp"], None, "/huge")["versions"][0]
    assert "more than" in version["reason"]
    assert version["sha256"] is None


class _PartitionOf(FakeCalls):
    def partitions(self) -> list[dict[str, Any]]:
        return [{"index": 1, "readable": True, "size": 4096}]


def test_a_file_larger_than_its_partition_is_refused() -> None:
    fs = _tree()
    points = FakePoints(fs)
    opened = points.open
    def open_partitioned(restore_point_id: str) -> Opened:
        return Opened(opened(restore_point_id).reader, _PartitionOf(fs))

    points.open = open_partitioned  # type: ignore[method-assign]
    service = FileService(points, FileLimits(sessions=4, per_project=2))
    with pytest.raises(FilesUnreadable, match="more than the 4096"):
        service.download("p", "rp", None, "/etc/hosts")


def test_versions_past_the_deadline_or_the_client_say_so_and_never_fail() -> None:
    fs = _tree()
    service, _points = _service(fs, versions_seconds=0.0)  # type: ignore[arg-type]
    late = service.versions("p", ["a", "b"], None, "/etc/hosts")["versions"]
    assert all("not read within" in v["reason"] for v in late)
    service, _points = _service(fs)
    gone = threading.Event()
    gone.set()
    cut = service.versions("p", ["a", "b"], None, "/etc/hosts", cancelled=gone)["versions"]
    assert all(v["reason"] == "the client went away" for v in cut)
    assert _points.openings == []


def test_an_archives_walks_end_at_their_deadline_and_with_the_client() -> None:
    service, _points = _service(_tree(), archive_walk_seconds=0.0)  # type: ignore[arg-type]
    with pytest.raises(ParserLimitExceeded, match="time"):
        service.archive("p", "rp", None, ["/etc"], "tar")
    service, _points = _service(_tree())
    gone = threading.Event()
    gone.set()
    with pytest.raises(ParserLimitExceeded):
        service.archive("p", "rp", None, ["/etc"], "tar", cancelled=gone)
    assert service.table.held("p") == 0


class _Garbage(FakeCalls):
    def stat(self, partition: int | None, path: str) -> dict[str, Any]:
        raise ValueError("a parser's garbage the session let through")


def test_a_version_that_fails_unexpectedly_is_a_reason_not_a_500() -> None:
    fs = _tree()
    points = FakePoints(fs)
    opened = points.open
    def open_garbage(restore_point_id: str) -> Opened:
        return Opened(opened(restore_point_id).reader, _Garbage(fs))

    points.open = open_garbage  # type: ignore[method-assign]
    service = FileService(points, FileLimits(sessions=4, per_project=2))
    version = service.versions("p", ["rp"], None, "/etc/hosts")["versions"][0]
    assert version["reason"] == ("restore point rp: /etc/hosts could not be read (an internal "
                                 "error; the operator's logs have details)")


def test_damage_is_told_in_a_fixed_message_naming_the_restore_point_and_file() -> None:
    fs = _tree()
    service, points = _service(fs)
    assert service.stat("p", "rp", None, "/etc/hosts")
    reader = points.opened[0].reader
    assert isinstance(reader, FakeReader)
    reader.corrupt_from = 0
    with pytest.raises(RestorePointDamaged) as raised:
        service.download("p", "rp", None, "/etc/hosts")
    assert raised.value.message == ("restore point rp is damaged (reading /etc/hosts): a block "
                                    "of it failed its check; verify it, or read another "
                                    "restore point")
    assert "object" not in str(raised.value.details)
