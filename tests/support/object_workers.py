"""Fresh object targets served by workers of their own: in place of a stack's worker, two
cairn-worker processes (so what one process caches, the other does not share) whose
settings add object targets on the local RGW under new prefixes, each reached directly or
through an S3 proxy on loopback (`s3_proxy.py`), with an in-process API that knows them.
Shared by the key tests (`tests/integration/worker/test_object_target_key.py`) and the
race bench (`bench/object_key_race.py`)."""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import rados
from fastapi.testclient import TestClient
from sqlalchemy import delete

from api.main import create_app
from services.db import Database
from services.records.object_target_keys import ObjectTargetKey
from services.settings import ObjectTargetSettings, Settings
from services.storage.s3 import Bucket
from tests.support import ceph, rgw
from tests.support.ceph import MiB
from tests.support.stack import BIN, HEADERS, Process, Stack


@dataclass
class ObjectWorkers:
    settings: Settings
    client: TestClient
    workers: list[Process]
    prefixes: dict[str, str]
    db: Database
    """The stack's database, where the targets' data keys are recorded."""

    def post(self, path: str, body: Any, headers: dict[str, str] = HEADERS) -> Any:
        return self.client.post(path, json=body, headers=headers)

    def get(self, path: str, headers: dict[str, str] = HEADERS, **params: Any) -> Any:
        return self.client.get(path, headers=headers, params=params)

    def wait_job(self, job_id: str, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job: dict[str, Any] = self.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                return job
            assert time.monotonic() < deadline, f"job {job_id} still {job['status']}: {job}"
            time.sleep(0.1)

    def backups(self, images: list[str], target: str, **extra: Any) -> list[dict[str, Any]]:
        """Started together, then waited for."""
        started = [self.post("/v1/backups", {"volume": f"ceph-a/volumes/{image}",
                                             "target": target, **extra}) for image in images]
        assert all(s.status_code == 202 for s in started), [s.text for s in started]
        return [self.wait_job(s.json()["id"]) for s in started]

    def restores(self, rp_ids: list[str], images: list[str]) -> dict[str, dict[str, Any]]:
        """Each restore point into a new image (its name appended to `images`), together;
        restore point id -> the finished job, with the image's name under `image`."""
        names = {rp_id: ceph.unique_name("key-restored") for rp_id in rp_ids}
        images.extend(names.values())
        started = {rp_id: self.post(f"/v1/restore-points/{rp_id}/restore",
                                    {"target": names[rp_id]}) for rp_id in rp_ids}
        assert all(s.status_code == 202 for s in started.values()), \
            [s.text for s in started.values()]
        return {rp_id: {**self.wait_job(s.json()["id"]), "image": names[rp_id]}
                for rp_id, s in started.items()}

    def restart(self) -> None:
        """Both workers killed, then started again: nothing they held in memory is left."""
        for worker in self.workers:
            worker.kill()
        for worker in self.workers:
            worker.start("ready")

    def bucket(self, target: str) -> Bucket:
        """The target's bucket in RGW itself, as whoever holds it sees it."""
        return Bucket(rgw.settings(self.prefixes[target]))


@contextmanager
def object_workers(stack: Stack, targets: list[str], *, endpoint: str | None = None,
                   concurrency: int = 8, tag: str = "key",
                   hand_back: bool = True) -> Iterator[ObjectWorkers]:
    """The stack's worker stopped, two workers (`concurrency` jobs each) with `targets`
    added, each under a new prefix, at `endpoint` (the RGW itself when None); every object
    under those prefixes, and the database's records of their keys, are removed afterwards
    and (`hand_back`) the stack's worker started again."""
    run = uuid.uuid4().hex[:8]
    prefixes = {name: f"{tag}-{run}-{name}" for name in targets}
    configured = {**stack.settings.object_targets, **{
        name: ObjectTargetSettings(**{**rgw.settings(prefix).model_dump(),
                                      **({"endpoint": endpoint} if endpoint else {}),
                                      "chunk_size_mib": 1, "max_jobs": 16})
        for name, prefix in prefixes.items()}}
    settings = stack.settings.model_copy(update={"object_targets": configured,
                                                 "max_jobs_per_project": 16})
    env = {**stack.env,
           "CAIRN_OBJECT_TARGETS": json.dumps({n: t.model_dump(mode="json")
                                               for n, t in configured.items()}),
           "CAIRN_MAX_JOBS_PER_PROJECT": "16", "CAIRN_WORKER_CONCURRENCY": str(concurrency),
           "CAIRN_WORKER_METRICS_PORT": "0"}
    workers = [Process("cairn-worker", [str(BIN / "cairn-worker")], env,
                       stack.log_dir / f"worker-{tag}-{run}-{n}.log") for n in (1, 2)]
    db = Database(settings.database_url)
    stack.worker.stop()
    try:
        for worker in workers:
            worker.start("ready")
        with TestClient(create_app(settings)) as client:
            yield ObjectWorkers(settings, client, workers, prefixes, db)
    finally:
        for worker in workers:
            worker.stop()
        if hand_back:
            stack.worker.start("ready")
        with db.session() as session:
            session.execute(delete(ObjectTargetKey).where(ObjectTargetKey.target.in_(targets)))
        db.dispose()
        for prefix in prefixes.values():
            bucket = Bucket(rgw.settings(prefix))
            try:
                for stored in list(bucket.list(deadline=math.inf)):
                    bucket.delete(stored.key)
            finally:
                bucket.close()


def tiny_volumes(io: rados.Ioctx, images: list[str], count: int, seed: int) -> dict[str, str]:
    """`count` volumes of odd sizes just over 2 MiB of random data (three 1 MiB chunks
    each), their names appended to `images`; name -> sha256."""
    made = {}
    for n in range(count):
        name = ceph.random_image(io, "key-src", 2 * MiB + 4097 * (n + 1) + 13, seed=seed + n)
        images.append(name)
        made[name] = ceph.sha256_of(io, name)
    return made


@dataclass
class RoundResult:
    backed_up: int
    restored_exactly: int
    failures: list[str]
    """Each backup or restore that did not succeed, or restored other bytes: why."""


def first_backups_then_restores(workers: ObjectWorkers, io: rados.Ioctx, target: str,
                                images: list[str], *, count: int = 16,
                                seed: int = 310) -> RoundResult:
    """`count` first backups to the (fresh) `target` at once, the workers restarted, then
    every restore point restored and compared with its source."""
    sources = tiny_volumes(io, images, count, seed)
    jobs = workers.backups(list(sources), target)
    failures = [f"backup job {j['id']}: {j['error']}" for j in jobs
                if j["status"] != "succeeded"]
    made = {j["restore_point_id"]: source for j, source in zip(jobs, sources, strict=True)
            if j["status"] == "succeeded"}
    workers.restart()
    exact = 0
    for rp_id, done in workers.restores(list(made), images).items():
        if done["status"] != "succeeded":
            failures.append(f"restore of {rp_id}: {done['error']}")
        elif ceph.sha256_of(io, done["image"]) != sources[made[rp_id]]:
            failures.append(f"restore of {rp_id}: other bytes than its source")
        else:
            exact += 1
    return RoundResult(len(made), exact, failures)
