"""Issue 31's acceptance line for webhooks, on the real stack with real hostile receiver
processes on loopback: with 10 hostile receivers (trickle and flood) registered in one
project, another project's healthy webhook gets each event within 5 s, backups run at
their usual time, the worker's memory stays within 100 MiB of its baseline, and no
delivery exceeds `webhook_max_attempts`."""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import rados
import sqlalchemy

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack
from tests.support.webhook_receiver import HostileReceiver, Receiver

pytestmark = [pytest.mark.ceph, pytest.mark.production_database_only]

MiB_RSS = 1024 * 1024
SIEGE_SECONDS = 10.0


def tree_rss(pid: int) -> int:
    """Resident bytes of the process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            status = Path(f"/proc/{current}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def _backup(stack: Stack, headers: dict[str, str], name: str) -> str:
    answer = stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}"}, headers)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def _waited(job: dict[str, Any]) -> float:
    """Seconds the job waited between being asked for and starting."""
    timings = job["timings"]
    return (datetime.fromisoformat(timings["started_at"])
            - datetime.fromisoformat(timings["created_at"])).total_seconds()


def test_hostile_receivers_cost_other_projects_backups_and_memory_nothing(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    hostile = {"X-Project-Id": f"hostile-{uuid.uuid4().hex[:8]}", "X-Roles": "member"}
    healthy = {"X-Project-Id": f"healthy-{uuid.uuid4().hex[:8]}", "X-Roles": "member"}
    name, other = (ceph.random_image(volumes_pool, "siege", 8 * MiB, seed=seed)
                   for seed in (31, 32))
    images += [name, other]
    usual = stack.wait_job(_backup(stack, healthy, name), headers=healthy)
    assert usual["status"] == "succeeded", usual
    baseline = tree_rss(stack.worker.proc.pid)  # type: ignore[union-attr]

    receivers = [HostileReceiver("trickle" if n % 2 else "flood", interval=1.0)
                 for n in range(10)]
    good = Receiver()
    hooks: list[tuple[dict[str, str], str]] = []
    peak = baseline
    try:
        for receiver in receivers:
            made = stack.post("/v1/webhooks", {"url": receiver.url}, hostile)
            assert made.status_code == 201, made.text
            hooks.append((hostile, made.json()["id"]))
        made = stack.post("/v1/webhooks", {"url": good.url}, healthy)
        assert made.status_code == 201, made.text
        hooks.append((healthy, made.json()["id"]))

        # The siege: every hostile receiver has events queued, a backup in the hostile
        # project (its events go to them) and one in the healthy project run meanwhile,
        # and the healthy webhook gets a test event every second.
        for _ in range(3):
            for headers, hook in hooks[:-1]:
                assert stack.post(f"/v1/webhooks/{hook}/test", {}, headers).status_code == 202
        jobs = [(hostile, _backup(stack, hostile, other))]
        sent: dict[str, float] = {}
        started = time.monotonic()
        while time.monotonic() - started < SIEGE_SECONDS:
            answer = stack.post(f"/v1/webhooks/{hooks[-1][1]}/test", {}, healthy)
            assert answer.status_code == 202, answer.text
            sent[answer.json()["id"]] = time.time()
            if len(sent) == 3:
                jobs.append((healthy, _backup(stack, healthy, name)))
            next_second = time.monotonic() + 1
            while time.monotonic() < next_second:
                peak = max(peak, tree_rss(stack.worker.proc.pid))  # type: ignore[union-attr]
                if peak > baseline + 100 * MiB_RSS:
                    break
                time.sleep(0.05)
            if peak > baseline + 100 * MiB_RSS:
                break
        assert peak <= baseline + 100 * MiB_RSS, (
            f"the worker grew by {(peak - baseline) / MiB_RSS:.0f} MiB")

        # Each of the healthy project's events (test events and its backup's) came within
        # 5 s of being made.
        deadline = max(sent.values()) + 6
        while time.time() < deadline and not set(sent) <= {
                r.headers["webhook-id"] for r in good.received}:
            time.sleep(0.05)
        arrived = {r.headers["webhook-id"]: r for r in good.received}
        late = {event: round(arrived[event].at - at, 1) if event in arrived else None
                for event, at in sent.items()
                if event not in arrived or arrived[event].at - at > 5}
        assert not late, f"the healthy webhook's events late or missing (s): {late}"
        for request in good.received:
            event = json.loads(request.body)
            made_at = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
            assert request.at - made_at <= 5, (event["type"], request.at - made_at)

        # Backups ran as usual: started at once, and took about as long as before.
        ran = []
        for headers, job_id in jobs:
            job = stack.wait_job(job_id, headers=headers)
            assert job["status"] == "succeeded", job
            assert _waited(job) < 5, job["timings"]
            assert job["timings"]["duration_seconds"] < \
                3 * usual["timings"]["duration_seconds"] + 5, (job["timings"], usual["timings"])
            ran.append((round(_waited(job), 2), job["timings"]["duration_seconds"]))

        engine = sqlalchemy.create_engine(stack.settings.database_url)
        try:
            with engine.connect() as db:
                most = db.execute(sqlalchemy.text(
                    "SELECT max(d.attempts) FROM event_deliveries d JOIN webhooks w "
                    "ON w.id = d.webhook_id WHERE w.project_id = :p"),
                    {"p": hostile["X-Project-Id"]}).scalar_one()
        finally:
            engine.dispose()
        assert most is not None
        assert 1 <= most <= stack.settings.webhook_max_attempts
        # The figures, for `pytest -s`.
        print(f"\nhostile receivers: worker grew {(peak - baseline) / MiB_RSS:.1f} MiB; "
              f"healthy events {len(sent)}, slowest "
              f"{max(arrived[e].at - at for e, at in sent.items()):.2f} s; backups (waited s, "
              f"took s) {ran} against {usual['timings']['duration_seconds']} s alone; most "
              f"attempts {most} of {stack.settings.webhook_max_attempts}")
    finally:
        for receiver in receivers:
            receiver.close()
        good.close()
        for headers, hook in hooks:
            stack.delete(f"/v1/webhooks/{hook}", headers)
