"""The Cairn processes a test needs, for real: the API in-process (FastAPI's TestClient on
the real app), and cairn-worker / cairn-scheduler as subprocesses, on the local stack's
Redis, PostgreSQL and Ceph."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy
from fastapi.testclient import TestClient

from api.main import create_app
from services.settings import Settings
from services.storage.s3 import Bucket
from tests.support import rgw
from tests.support.ceph import STATE, conf_path
from tests.support.redis_server import free_port

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
REDIS_PORT = int(os.environ.get("CAIRN_REDIS_PORT", "31379"))
PG_PORT = int(os.environ.get("CAIRN_PG_PORT", "31432"))
PROJECT = "project-a"
HEADERS = {"X-Project-Id": PROJECT, "X-Roles": "member"}
ADMIN_PROJECT = "cloud-admin"
"""The stacks' CAIRN_ADMIN_PROJECTS: the admin role there is the cloud's administrator (in
project-a, as in any other, it administers that project only)."""
CLOUD_ADMIN = {"X-Project-Id": ADMIN_PROJECT, "X-Roles": "admin"}


def service_env(database_url: str, redis_db: int, **overrides: str) -> dict[str, str]:
    env = {
        # Said explicitly, as every process must: a development stack on loopback.
        "CAIRN_ENVIRONMENT": "development",
        "CAIRN_AUTH_STRATEGY": "noauth",
        "CAIRN_ADMIN_PROJECTS": json.dumps([ADMIN_PROJECT]),
        "CAIRN_DATABASE_URL": database_url,
        "CAIRN_REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/{redis_db}",
        "CAIRN_CLUSTERS": json.dumps({"ceph-a": {"conf": str(conf_path("ceph-a"))},
                                      "ceph-b": {"conf": str(conf_path("ceph-b"))}}),
        "CAIRN_BACKUP_TARGETS": json.dumps({
            "local": {"cluster": "ceph-a", "pool": "backups"},
            "offsite": {"cluster": "ceph-b", "pool": "backups"},
            # Same pool, its own concurrency limit: the limits tests run against it.
            "limited": {"cluster": "ceph-a", "pool": "backups", "max_jobs": 3}}),
        "CAIRN_DEFAULT_BACKUP_TARGET": "local",
        # As `make up`'s: without Cinder, GET /v1/volumes lists the images of this pool.
        "CAIRN_VOLUME_POOLS": json.dumps({"ceph-a": ["volumes"]}),
        "CAIRN_PROGRESS_INTERVAL_SECONDS": "0.3",
        "CAIRN_JOB_HEARTBEAT_TIMEOUT_SECONDS": "4",
        "CAIRN_RECONCILE_INTERVAL_SECONDS": "0.5",
        "CAIRN_SCHEDULER_TICK_SECONDS": "0.2",
        # Longer than the heartbeat timeout: a dead worker's job is queued again (and keeps
        # its slot) before the slot could go to another job, so the limit is never exceeded.
        "CAIRN_LEASE_SECONDS": "6",
        "CAIRN_JOB_REDISPATCH_AFTER_SECONDS": "5",
        "CAIRN_WORKER_CONCURRENCY": "4",
        # A small window keeps "resumed, not restarted" measurable on test-sized volumes.
        "CAIRN_COPY_WINDOW": "4",
        # Every stack's worker and scheduler serve /metrics, as in production.
        "CAIRN_WORKER_METRICS_PORT": str(free_port()),
        "CAIRN_SCHEDULER_METRICS_PORT": str(free_port()),
        "CAIRN_TARGET_PROBE_INTERVAL_SECONDS": "1",
        # Webhook receivers of the tests listen on loopback; retries come fast.
        "CAIRN_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.0/8"]',
        "CAIRN_WEBHOOK_RETRY_BASE_SECONDS": "0.2",
        "CAIRN_WEBHOOK_MAX_ATTEMPTS": "4",
        "CAIRN_WEBHOOK_DISABLE_AFTER_FAILURES": "2",
        "CAIRN_WEBHOOK_TIMEOUT_SECONDS": "2",
        # Senders look for due deliveries as often as the scheduler ticks here.
        "CAIRN_WEBHOOK_POLL_SECONDS": "0.2",
        "CAIRN_WEBHOOK_SECRET_KEY_FILE": str(webhook_key_file()),
    }
    # Each stack's own file service (file-level restore): the API proxies to it.
    files_port = free_port()
    env.update({"CAIRN_FILES_BIND": f"127.0.0.1:{files_port}",
                "CAIRN_FILES_URL": f"http://127.0.0.1:{files_port}",
                "CAIRN_FILES_TOKEN": FILES_TOKEN})
    env.update(object_target_env(database_url))
    env.update(directory_target_env(database_url))
    env.update(overrides)
    return env


FILES_TOKEN = "tests-file-service-token-" + "0" * 40
"""The Bearer token the test stacks' API presents to their cairn-files (a test value)."""
OBJECT_KEY_FILE = STATE / "tests-object-target.key"
WEBHOOK_KEY_FILE = STATE / "tests-webhook-secret.key"
DIRECTORY_TARGETS = STATE / "directory-targets"
"""Where the stacks' directory targets live, one directory per stack (on this machine's
disk, not in a memstore OSD); each stack's is removed when it stops."""


def webhook_key_file() -> Path:
    """The key the test stacks seal webhooks' secrets under (made once)."""
    if not WEBHOOK_KEY_FILE.exists():
        # Made aside and linked into place: sessions starting at once all read one key.
        made = WEBHOOK_KEY_FILE.with_name(f"{WEBHOOK_KEY_FILE.name}.{os.getpid()}")
        made.write_text(os.urandom(32).hex())
        try:
            os.link(made, WEBHOOK_KEY_FILE)
        except FileExistsError:
            pass
        finally:
            made.unlink()
    return WEBHOOK_KEY_FILE


def object_target_env(database_url: str) -> dict[str, str]:
    """The object target `s3` on the local RGW (when it runs), under a prefix of this
    stack's own: the leases that keep its garbage collection safe live in its database."""
    if not rgw.CREDENTIALS.exists():
        return {}
    _operator_key_file()
    target = rgw.settings(f"stack-{_stack_tag(database_url)}").model_dump(mode="json")
    return {"CAIRN_OBJECT_TARGETS": json.dumps({"s3": {**target, "chunk_size_mib": 1}}),
            "CAIRN_OBJECT_KEY_FILE": str(OBJECT_KEY_FILE)}


def directory_target_env(database_url: str) -> dict[str, str]:
    """The directory target `dir`, in a directory of this stack's own (its leases and its
    data key's record live in the stack's database), sealed with the object targets'
    operator's key."""
    _operator_key_file()
    path = DIRECTORY_TARGETS / f"stack-{_stack_tag(database_url)}"
    path.mkdir(parents=True, exist_ok=True)
    return {"CAIRN_DIRECTORY_TARGETS": json.dumps({"dir": {"path": str(path),
                                                            "chunk_size_mib": 1}}),
            "CAIRN_OBJECT_KEY_FILE": str(OBJECT_KEY_FILE)}


def _stack_tag(database_url: str) -> str:
    return f"{os.getpid()}-{hashlib.sha256(database_url.encode()).hexdigest()[:8]}"


def _operator_key_file() -> None:
    """The operator's key of the stacks' object and directory targets (made once)."""
    if not OBJECT_KEY_FILE.exists():
        # Made aside and linked into place: a process reading it never sees half of it.
        made = OBJECT_KEY_FILE.with_name(f"{OBJECT_KEY_FILE.name}.{os.getpid()}")
        made.write_text(rgw.OPERATOR_KEY.hex())
        try:
            os.link(made, OBJECT_KEY_FILE)
        except FileExistsError:
            pass
        finally:
            made.unlink()


@dataclass
class Process:
    name: str
    argv: list[str]
    env: Mapping[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    cwd: Path = REPO
    """Where it runs: another checkout's tree runs that tree's code (bench/rbd_path.py),
    with the tree on its PYTHONPATH."""

    _offset: int = field(default=0, init=False, repr=False)

    def start(self, ready_text: str | None = None, timeout: float = 60) -> None:
        self.launch()
        if ready_text is not None:
            self.wait_ready(ready_text, timeout)

    def launch(self) -> None:
        """Start the process and return at once (`wait_ready` waits for its log line):
        processes that do not depend on each other start side by side."""
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, env={**os.environ, **self.env}, stdout=out,
                                         stderr=subprocess.STDOUT, cwd=self.cwd)

    def wait_ready(self, ready_text: str, timeout: float = 60) -> None:
        """Until the process logs `ready_text` (since its launch); it exiting first, or
        the timeout passing, raises with the end of its log."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        seen = self._offset
        with self.log.open("rb") as log:
            log.seek(self._offset)
            text = ""
            while time.monotonic() < deadline:
                # Only what was appended since the last look (a line may come in parts).
                text = text[-len(ready_text):] + log.read().decode(errors="replace")
                if ready_text in text:
                    return
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            seen = log.tell()
        raise RuntimeError(f"{self.name} did not start; see {self.log}:\n"
                           + self.log.read_bytes()[self._offset:seen].decode(
                               errors="replace")[-3000:])

    def dump_stacks(self) -> None:
        """SIGUSR2: the process writes every thread's stack to its log (faulthandler)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR2)

    def aborted(self) -> bool:
        """Whether the process died of SIGABRT: librbd's abort (docs/operations.md), never
        a test's own kill (SIGKILL) or stop (SIGTERM)."""
        return self.proc is not None and self.proc.poll() == -signal.SIGABRT

    def tail(self, size: int) -> str:
        return self.log.read_bytes()[-size:].decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up, as in a crash."""
        self.end(signal.SIGKILL)

    def end(self, how: signal.Signals) -> None:
        """Send `how` and wait for the process to die of it."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(how)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@dataclass
class Stack:
    settings: Settings
    env: dict[str, str]
    client: TestClient
    worker: Process
    scheduler: Process
    log_dir: Path
    extra: list[Process] = field(default_factory=list)

    def post(self, path: str, body: Any, headers: Mapping[str, str] = HEADERS) -> Any:
        return self.client.post(path, json=body, headers=dict(headers))

    def get(self, path: str, headers: Mapping[str, str] = HEADERS, **params: Any) -> Any:
        return self.client.get(path, headers=dict(headers), params=params)

    def delete(self, path: str, headers: Mapping[str, str] = HEADERS) -> Any:
        return self.client.delete(path, headers=dict(headers))

    def wait_job(self, job_id: str, *, statuses: tuple[str, ...] = ("succeeded", "failed",
                 "cancelled"), timeout: float = 120,
                 headers: Mapping[str, str] = HEADERS) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        job: dict[str, Any] = {}
        while time.monotonic() < deadline:
            job = self.get(f"/v1/jobs/{job_id}", headers).json()
            if job["status"] in statuses:
                return job
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} still {job.get('status')} after {timeout} s: {job}\n"
                             + self.busy_with())

    def busy_with(self) -> str:
        """What the stack's worker was doing: its active jobs (all projects) and the end of
        its log. A job left waiting usually waited behind others, and CI keeps no logs."""
        engine = sqlalchemy.create_engine(self.settings.database_url)
        try:
            with engine.connect() as db:
                active = db.execute(sqlalchemy.text(
                    "SELECT id, kind, status, project_id, started_at, heartbeat_at, group_id "
                    "FROM jobs WHERE status IN ('queued', 'running') ORDER BY created_at"
                )).all()
        finally:
            engine.dispose()
        for process in (self.worker, self.scheduler):
            process.dump_stacks()
        time.sleep(1)
        return ("active jobs:\n" + "\n".join(f"  {tuple(row)}" for row in active)
                + "".join(f"\nend of {p.log}:\n{p.tail(8000)}"
                          for p in (self.worker, self.scheduler)))

    def revive_aborted(self) -> list[str]:
        """Start again each of the stack's processes that died of an abort, as production's
        supervisor would (the reconciler then requeues the jobs it held); the names of
        those started. The stack lives for a whole session: without this, one abort failed
        every later test that used it."""
        revived = []
        for process, ready in ((self.worker, "ready"), (self.scheduler, "cairn-scheduler started")):
            if process.aborted():
                process.start(ready)
                revived.append(process.name)
        return revived

    def restart_worker(self) -> None:
        self.worker.kill()
        self.worker.start("ready")


@contextmanager
def api_process(env: Mapping[str, str], log: Path) -> Iterator[str]:
    """A real cairn-api process (for clients that need TCP: Prometheus, Schemathesis);
    yields its host:port."""
    port = free_port()
    process = Process("cairn-api", [str(BIN / "cairn-api"), "--port", str(port)], env, log)
    process.start("Uvicorn running")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        process.stop()


FILES_READY = "Uvicorn running"


def start_stack(database_url: str, redis_db: int, log_dir: Path, **overrides: str) -> Stack:
    subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "-n", str(redis_db), "flushdb"],
                   check=True, capture_output=True)
    env = service_env(database_url, redis_db, **overrides)
    settings = Settings(**{k.removeprefix("CAIRN_").lower(): _parse(v) for k, v in env.items()})
    log_dir.mkdir(parents=True, exist_ok=True)
    worker = Process("cairn-worker", [str(BIN / "cairn-worker")], env, log_dir / "worker.log")
    scheduler = Process("cairn-scheduler", [str(BIN / "cairn-scheduler")], env,
                        log_dir / "scheduler.log")
    files = Process("cairn-files", [str(BIN / "cairn-files")], env, log_dir / "files.log")
    try:
        worker.launch()
        scheduler.launch()
        files.launch()
        client = TestClient(create_app(settings))
        client.__enter__()
        worker.wait_ready("ready")
        scheduler.wait_ready("cairn-scheduler started")
        files.wait_ready(FILES_READY)
    except BaseException:
        # Nothing outlives a stack that did not start (a fixture that raised never stops
        # what it started).
        for proc in (files, scheduler, worker):
            proc.stop()
        raise
    return Stack(settings, env, client, worker, scheduler, log_dir, extra=[files])


def stop_stack(stack: Stack) -> None:
    stack.client.__exit__(None, None, None)
    for proc in (stack.scheduler, stack.worker, *stack.extra):
        proc.stop()
    # The stack's object target lives under a prefix of its own in the local bucket, on
    # the memstore OSD: give the memory back. (Only the local RGW's: a test may add a
    # target on an endpoint nothing listens on.)
    local = json.loads(rgw.CREDENTIALS.read_text())["endpoint"] \
        if rgw.CREDENTIALS.exists() else None
    for settings in stack.settings.object_targets.values():
        if settings.endpoint != local:
            continue
        bucket = Bucket(settings)
        try:
            for stored in list(bucket.list(deadline=math.inf)):
                bucket.delete(stored.key)
        finally:
            bucket.close()
    # And its directory targets (only those the stacks made: a test may add one elsewhere).
    for directory in stack.settings.directory_targets.values():
        if directory.path.parent == DIRECTORY_TARGETS:
            shutil.rmtree(directory.path, ignore_errors=True)


def _parse(value: str) -> Any:
    try:
        return json.loads(value) if value[:1] in "{[" else value
    except json.JSONDecodeError:
        return value


__all__ = ["ADMIN_PROJECT", "CLOUD_ADMIN", "HEADERS", "PG_PORT", "PROJECT", "STATE", "Stack",
           "start_stack", "stop_stack"]
