"""The parser child under attack: a stand-in parser (tests/support/hostile_parser.py) does
what a crafted filesystem, or code that took the parser over, would try, inside the real
sealed child, and the session keeps its limits. Tools tier: real processes and real
clocks (each test a fraction of a second, the deadline ones about two), no server."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.errors import (
    FileServiceUnavailable,
    FilesUnreadable,
    ParserLimitExceeded,
    PathNotFound,
    RestorePointDamaged,
)
from tests.support.file_reader import FileReader
from tests.support.hostile_parser import FACTORY
from worker.files import sandbox
from worker.files.session import ParserLimits, ParserSession
from worker.files.zygote import ForkedProcess, Forker

LIMITS = ParserLimits(memory_bytes=256 << 20, cpu_seconds=60, call_seconds=2.0,
                      search_seconds=2.0, max_reply_bytes=1 << 20,
                      read_bytes_per_call=32 << 20)
IMAGE_SIZE = 3 << 20


CYCLE = bytes(index * 7 % 251 for index in range(251))


def pattern(offset: int, length: int) -> bytes:
    """The image's bytes: no two 251-byte stretches apart alike, so a shifted read shows."""
    start = offset % len(CYCLE)
    return (CYCLE * (length // len(CYCLE) + 2))[start:start + length]


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "image.raw"
    path.write_bytes(pattern(0, IMAGE_SIZE))
    return path


@pytest.fixture
def reader(image: Path) -> Iterator[FileReader]:
    with FileReader(image, block_size=1 << 20) as reader:
        yield reader


@pytest.fixture(scope="module")
def forker() -> Iterator[Forker]:
    forker = Forker()
    yield forker
    forker.close()


@pytest.fixture(params=["spawned", "forked"])
def start(request: pytest.FixtureRequest, forker: Forker) -> sandbox.StartChild:
    if request.param == "spawned":
        return sandbox.spawn

    def fork(config: sandbox.ChildConfig) -> sandbox.Child:
        child = forker.child(config)
        assert isinstance(child.process, ForkedProcess), "spawned: the zygote is down"
        return child
    return fork


@pytest.fixture
def session(reader: FileReader, start: sandbox.StartChild) -> Iterator[ParserSession]:
    session = ParserSession(reader, LIMITS, factory=FACTORY, start=start)
    yield session
    session.close()


def outcome(session: ParserSession, command: str) -> object:
    return json.loads(session.stat(None, "/" + command)["target"])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0


def test_the_child_reads_the_image_through_its_parent_in_cached_blocks(
        session: ParserSession, reader: FileReader) -> None:
    assert session.partitions()[0]["size"] == IMAGE_SIZE
    for offset in range(1000, 200_000, 512):
        assert session.read(None, "/f", offset, 100) == pattern(offset, 100)
    # One 256 KiB block fetched for the ~400 small reads inside it.
    assert reader.reads <= 2
    assert session.read(None, "/f", 5, 900 << 10) == pattern(5, 900 << 10)


@pytest.mark.parametrize("command", [
    "socket", "unix-socket", "socketpair", "exec", "spawn", "fork", "ceph", "keyring",
    "passwd", "proc-environ", "write", "unlink", "kill-parent",
])
def test_what_a_taken_over_parser_tries_is_refused(session: ParserSession,
                                                   command: str) -> None:
    assert str(outcome(session, command)).startswith("refused: PermissionError")


def test_no_file_is_written(session: ParserSession) -> None:
    outcome(session, "write")
    assert not Path("/tmp/cairn-parser-was-here").exists()


def test_the_child_holds_no_credentials_and_no_fd_but_its_pipes(
        session: ParserSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_DATABASE_URL", "postgresql://secret")
    monkeypatch.setenv("CEPH_KEYRING", "/etc/ceph/ceph.client.cairn.keyring")
    keep = os.open("/dev/null", os.O_RDONLY)  # an fd of the parent's, not inheritable
    os.set_inheritable(keep, True)
    try:
        assert outcome(session, "environment") == {"LANG": "C.UTF-8"}
        assert outcome(session, "fds") == [0, 1, 2]
    finally:
        os.close(keep)
    limits = Path(f"/proc/{session.child_pid}/limits").read_text()
    assert f"Max address space         {256 << 20}" in limits
    assert "Max file size             0" in limits
    assert "Max core file size        0" in limits
    assert "Max processes             0" in limits


def test_an_endless_loop_ends_at_the_deadline_and_the_next_call_gets_a_fresh_child(
        session: ParserSession) -> None:
    session.partitions()
    first = session.child_pid
    assert first is not None
    started = time.monotonic()
    with pytest.raises(ParserLimitExceeded, match=r"^time") as refused:
        outcome(session, "loop")
    assert LIMITS.call_seconds <= time.monotonic() - started < LIMITS.call_seconds + 1.5
    assert refused.value.details == {"limit": "time"}
    assert not alive(first)
    assert session.partitions()[0]["size"] == IMAGE_SIZE
    assert session.child_pid not in (None, first)


def test_a_memory_bomb_is_stopped_at_the_childs_limit_not_the_parents(
        session: ParserSession) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    session.partitions()
    child = session.child_pid
    assert child is not None
    with pytest.raises(ParserLimitExceeded, match=r"^memory") as refused:
        outcome(session, "bomb")
    assert refused.value.details == {"limit": "memory"}
    assert not alive(child)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 32 << 10  # KiB
    assert outcome(session, "past-end") == pattern(IMAGE_SIZE - 10, 10).hex()


def test_a_child_that_dies_is_a_limit_and_is_replaced(session: ParserSession) -> None:
    with pytest.raises(ParserLimitExceeded, match=r"^memory"):
        outcome(session, "crash")
    assert outcome(session, "far-past-end") == ""


@pytest.mark.parametrize(("command", "error", "message"), [
    ("garbage", FilesUnreadable, "its parser failed"),
    ("huge", ParserLimitExceeded, r"^reply size"),
])
def test_a_child_that_breaks_the_framing_is_killed(
        session: ParserSession, command: str, error: type[Exception], message: str) -> None:
    session.partitions()
    child = session.child_pid
    assert child is not None
    with pytest.raises(error, match=message):
        outcome(session, command)
    assert not alive(child)
    assert session.partitions()[0]["index"] == 0


def test_a_reply_larger_than_the_limit_is_refused(session: ParserSession) -> None:
    with pytest.raises(ParserLimitExceeded, match=r"^reply size"):
        session.list(None, "/", None, 10_000)
    assert len(session.list(None, "/", None, 10)["entries"]) == 10


def test_a_print_in_the_child_does_not_reach_the_frames(session: ParserSession) -> None:
    assert outcome(session, "print") == "printed"
    assert session.partitions()[0]["size"] == IMAGE_SIZE


def test_reads_past_the_image_are_clipped(session: ParserSession) -> None:
    assert outcome(session, "past-end") == pattern(IMAGE_SIZE - 10, 10).hex()
    assert outcome(session, "far-past-end") == ""
    assert session.read(None, "/f", IMAGE_SIZE - 3, 1 << 20) == pattern(IMAGE_SIZE - 3, 3)


def test_a_damaged_block_is_a_damaged_restore_point(session: ParserSession,
                                                    reader: FileReader) -> None:
    reader.corrupt = {2}
    with pytest.raises(RestorePointDamaged, match="block 2"):
        session.read(None, "/f", (2 << 20) + 5, 10)
    assert session.read(None, "/f", 5, 10) == pattern(5, 10)


def test_a_call_reading_more_than_its_budget_is_stopped(
        reader: FileReader, start: sandbox.StartChild) -> None:
    session = ParserSession(reader, ParserLimits(read_bytes_per_call=1 << 20),
                            factory=FACTORY, start=start)
    try:
        with pytest.raises(ParserLimitExceeded, match=r"^image bytes"):
            session.read(None, "/f", 0, 2 << 20)
        assert session.read(None, "/f", 0, 10) == pattern(0, 10)
    finally:
        session.close()


def test_the_childs_errors_are_the_tenants_errors(session: ParserSession) -> None:
    with pytest.raises(PathNotFound, match="no such command"):
        outcome(session, "nothing-here")
    with pytest.raises(ParserLimitExceeded, match=r"^entries") as limit:
        outcome(session, "limit")
    assert limit.value.details == {"limit": "entries"}
    # The parser's own failure: a fixed reason naming the path; its words in the log only.
    with pytest.raises(FilesUnreadable) as internal:
        outcome(session, "internal")
    assert internal.value.message == ("/internal could not be read: the parser failed on it "
                                      "(an internal error; the operator's logs have details)")
    assert internal.value.details == {"path": "/internal"}
    with pytest.raises(ParserLimitExceeded, match=r"^memory"):
        outcome(session, "memory-error")


def test_two_sessions_have_separate_children(image: Path, start: sandbox.StartChild) -> None:
    with FileReader(image) as one_reader, FileReader(image) as other_reader:
        one = ParserSession(one_reader, LIMITS, factory=FACTORY, start=start)
        other = ParserSession(other_reader, LIMITS, factory=FACTORY, start=start)
        try:
            one.partitions()
            other.partitions()
            assert one.child_pid != other.child_pid
            survivor = other.child_pid
            with pytest.raises(ParserLimitExceeded):
                outcome(one, "crash")
            assert other.child_pid == survivor
            assert outcome(other, "past-end") == pattern(IMAGE_SIZE - 10, 10).hex()
        finally:
            one.close()
            other.close()


def test_a_closed_session_answers_no_more(session: ParserSession) -> None:
    session.partitions()
    child = session.child_pid
    assert child is not None
    session.close()
    assert not alive(child)
    with pytest.raises(FileServiceUnavailable):
        session.partitions()


def test_a_pool_hands_out_sealed_children_started_ahead(
        reader: FileReader, start: sandbox.StartChild) -> None:
    pool = sandbox.ChildPool(LIMITS.child(FACTORY), size=2, start=start)
    try:
        pool.take().kill()  # starts the filler
        deadline = time.monotonic() + 10
        while len(pool.idle_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        idle = pool.idle_pids()
        assert len(idle) == 2
        session = ParserSession(reader, LIMITS, factory=FACTORY, pool=pool)
        started = time.monotonic()
        assert session.partitions()[0]["size"] == IMAGE_SIZE
        assert time.monotonic() - started < 0.1
        assert session.child_pid in idle
        session.close()
    finally:
        pool.close()
    assert not any(alive(pid) for pid in idle)


@pytest.fixture
def bystander() -> Iterator[int]:
    """A process of the service's user that is not the child's: the file service itself,
    its zygote or another tenant's parser stand for it."""
    process = subprocess.Popen(["sleep", "30"])
    yield process.pid
    process.kill()
    process.wait()


@pytest.mark.parametrize("command", ["sched-idle", "affinity", "sched-param", "ioprio",
                                     "prlimit"])
def test_a_taken_over_parser_cannot_reschedule_another_process(
        session: ParserSession, bystander: int, command: str) -> None:
    assert str(outcome(session, f"{command}/{bystander}")).startswith("refused")


@pytest.mark.parametrize("pid", ["0", "self"])
def test_the_parser_may_still_set_its_own_affinity(session: ParserSession, pid: str) -> None:
    assert str(outcome(session, f"own-affinity/{pid}")).startswith("done")


@pytest.mark.parametrize("command", ["sysv-shm", "sysv-msg", "sysv-sem"])
def test_a_taken_over_parser_cannot_make_system_v_ipc(session: ParserSession,
                                                      command: str) -> None:
    assert str(outcome(session, command)).startswith("refused")


def test_the_child_has_an_ipc_namespace_of_its_own(session: ParserSession) -> None:
    outcome(session, "sysv-shm")  # the child is running
    pid = session.child_pid
    assert pid is not None
    assert os.readlink(f"/proc/{pid}/ns/ipc") != os.readlink("/proc/self/ns/ipc")


def test_the_child_is_the_first_the_oom_killer_takes(session: ParserSession) -> None:
    outcome(session, "sysv-shm")
    assert Path(f"/proc/{session.child_pid}/oom_score_adj").read_text().strip() == "1000"


def test_an_answer_of_the_wrong_shape_is_unreadable_and_the_child_replaced(
        session: ParserSession) -> None:
    outcome(session, "print")
    first = session.child_pid
    with pytest.raises(FilesUnreadable, match="malformed stat"):
        session.stat(None, "/misshapen")
    assert outcome(session, "print") == "printed"
    assert session.child_pid != first
