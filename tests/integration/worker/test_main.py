"""`cairn-worker` as a process: when librbd or librados aborts it (a failed assertion, an
uncaught C++ exception: "terminate called after throwing ..."), which ends every job it
runs, its log says what each thread was doing, not just the C++ message. A suite run saw
exactly that message alone, with nothing to tell which call in which job had made it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.stack import BIN, Process, service_env
from tests.support.workers import RedisDb, redis_db

pytestmark = [pytest.mark.ceph]


def test_an_aborted_worker_leaves_every_threads_stack_in_its_log(
        fresh_database_url: str, tmp_path: Path) -> None:
    # A database and broker of its own: the worker aborted here takes no other test's jobs
    # or deliveries with it.
    env = service_env(fresh_database_url, redis_db(RedisDb.SCRATCH))
    worker = Process("cairn-worker", [str(BIN / "cairn-worker")], env, tmp_path / "worker.log")
    worker.start("ready")
    try:
        assert worker.proc is not None
        worker.proc.send_signal(signal.SIGABRT)  # what abort() in librbd raises
        assert worker.proc.wait(30) == -signal.SIGABRT
    finally:
        worker.stop()
    log = worker.log.read_text(errors="replace")
    assert "Fatal Python error: Aborted" in log, log[-3000:]
    # Every thread: Celery's own and the webhook senders beside them.
    assert log.count("Thread 0x") >= 2, log[-3000:]
    assert "worker/senders.py" in log, log[-3000:]
