"""The fork server of parser children (worker/files/zygote.py, worker/files/parser/zygote.py):
its children are sealed as spawned ones are, outlive it, are killed on their deadline and
leave no process behind; a zygote that dies or hangs is replaced, and children are spawned
while none serves. (The hostile tests of test_sandbox.py run on forked children too.)
Tools tier: real processes, each test well under a second but the deadline one (~1 s)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.errors import ParserLimitExceeded
from tests.support.file_reader import FileReader
from tests.support.hostile_parser import FACTORY
from worker.files import sandbox, zygote
from worker.files.session import ParserLimits, ParserSession
from worker.files.zygote import ForkedProcess, Forker

LIMITS = ParserLimits(memory_bytes=256 << 20, cpu_seconds=60, call_seconds=1.0,
                      max_reply_bytes=1 << 20)
CONFIG = LIMITS.child(FACTORY)
IMAGE_SIZE = 1 << 20


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[FileReader]:
    path = tmp_path / "image.raw"
    path.write_bytes(bytes(range(256)) * (IMAGE_SIZE // 256))
    with FileReader(path) as reader:
        yield reader


@pytest.fixture
def forker() -> Iterator[Forker]:
    forker = Forker()
    yield forker
    forker.close()


def session_of(reader: FileReader, forker: Forker) -> ParserSession:
    return ParserSession(reader, LIMITS, factory=FACTORY, start=forker.child)


def status_of(pid: int) -> dict[str, str] | None:
    """/proc/<pid>/status as a dict, None once the process is gone (reaped)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return None
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def field(pid: int | None, name: str) -> str:
    status = status_of(pid) if pid is not None else None
    assert status is not None, f"process {pid} is gone"
    return status[name]


def gone(pid: int) -> bool:
    """Neither running nor a zombie (a process that ended but was never reaped)."""
    status = status_of(pid)
    return status is None or status["State"].startswith(("Z", "X"))


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        status = status_of(int(entry)) if entry.isdigit() else None
        if status is not None and status.get("PPid") == str(pid):
            found.append(int(entry))
    return found


def limit(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith(name):
            return line[26:].split()[0]
    raise AssertionError(f"no limit {name}")


def test_a_forked_child_is_the_zygotes_and_sealed_as_a_spawned_one(
        reader: FileReader, forker: Forker) -> None:
    session = session_of(reader, forker)
    try:
        assert session.partitions()[0]["size"] == IMAGE_SIZE
        child, parent = session.child_pid, forker.zygote_pid(CONFIG)
        assert child is not None
        assert parent is not None
        assert field(child, "PPid") == str(parent)
        assert os.getsid(child) == child != os.getsid(parent)
        assert limit(child, "Max processes") == "0"
        assert limit(parent, "Max processes") != "0"  # it forks
        assert limit(child, "Max cpu time") == "60"
        assert limit(child, "Max open files") == "16"
        assert limit(parent, "Max address space") == limit(child, "Max address space")
        assert field(child, "Seccomp") == "2"
        assert field(parent, "Seccomp") == "0"
        assert json.loads(session.stat(None, "/fork")["target"]).startswith(
            "refused: PermissionError")
    finally:
        session.close()


def test_children_outlive_a_killed_zygote_which_is_replaced(reader: FileReader,
                                                            forker: Forker) -> None:
    first = session_of(reader, forker)
    second = session_of(reader, forker)
    try:
        first.partitions()
        old = forker.zygote_pid(CONFIG)
        assert old is not None
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while not gone(old) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.read(None, "/f", 5, 3) == bytes([5, 6, 7])  # the orphan serves on
        second.partitions()  # finds the zygote dead, starts another
        new = forker.zygote_pid(CONFIG)
        assert new not in (None, old)
        assert field(second.child_pid, "PPid") == str(new)
        orphan = first.child_pid
        assert orphan is not None
        first.close()  # killed through its pidfd, though the zygote that forked it is dead
        assert gone(orphan)
    finally:
        first.close()
        second.close()


def test_a_forked_child_past_its_deadline_is_killed_and_reaped(
        reader: FileReader, forker: Forker) -> None:
    session = session_of(reader, forker)
    try:
        session.partitions()
        child = session.child_pid
        assert child is not None
        started = time.monotonic()
        with pytest.raises(ParserLimitExceeded, match=r"^time"):
            session.stat(None, "/loop")
        assert time.monotonic() - started < LIMITS.call_seconds + 1.0
        assert status_of(child) is None  # killed, and reaped by the zygote
        assert session.partitions()[0]["size"] == IMAGE_SIZE
        assert session.child_pid != child
    finally:
        session.close()


def test_a_child_killed_by_its_cpu_limit_is_told_from_one_out_of_memory(
        reader: FileReader, forker: Forker) -> None:
    session = session_of(reader, forker)
    try:
        with pytest.raises(ParserLimitExceeded, match=r"^memory"):
            session.stat(None, "/crash")  # exit status 9, as the zygote relays it
        session.partitions()
        child = session._child
        assert child is not None
        child.signal(signal.SIGXCPU)
        assert child.process.wait(2.0) == -signal.SIGXCPU
    finally:
        session.close()


def test_no_process_is_left_after_sessions_close(reader: FileReader) -> None:
    # The process-wide Forker of earlier tests (sessions' default) keeps its zygote: only
    # what this test started must be gone.
    before = set(children_of(os.getpid()))
    forker = Forker()
    sessions = [session_of(reader, forker) for _ in range(4)]
    for session in sessions:
        session.partitions()
    parent = forker.zygote_pid(CONFIG)
    assert parent is not None
    children = [session.child_pid for session in sessions]
    assert sorted(children_of(parent)) == sorted(pid for pid in children if pid is not None)
    for session in sessions:
        session.close()
    assert children_of(parent) == []  # no zombie either: the zygote reaped each
    forker.close()
    assert status_of(parent) is None
    assert set(children_of(os.getpid())) <= before


def test_children_are_spawned_while_no_zygote_starts(
        reader: FileReader, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zygote, "CODE", "raise SystemExit(1)")
    forker = Forker()
    try:
        started = time.monotonic()
        child = forker.child(CONFIG)
        assert isinstance(child.process, sandbox.SpawnedProcess)
        child.close()
        monkeypatch.undo()
        # Not tried again at once: a broken zygote does not cost every session its start.
        again = forker.child(CONFIG)
        assert isinstance(again.process, sandbox.SpawnedProcess)
        again.close()
        assert time.monotonic() - started < zygote.RETRY_SECONDS
    finally:
        forker.close()


def test_a_zygote_that_does_not_answer_is_replaced_by_a_spawn(
        reader: FileReader, forker: Forker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zygote, "CONTROL_SECONDS", 0.3)
    forker.child(CONFIG).close()
    stuck = forker.zygote_pid(CONFIG)
    assert stuck is not None
    os.kill(stuck, signal.SIGSTOP)
    child = forker.child(CONFIG)
    try:
        assert isinstance(child.process, sandbox.SpawnedProcess)
        assert gone(stuck)
        assert forker.zygote_pid(CONFIG) is None  # started again on the next request
        replacement = forker.child(CONFIG)
        assert isinstance(replacement.process, ForkedProcess)
        replacement.close()
    finally:
        child.close()
