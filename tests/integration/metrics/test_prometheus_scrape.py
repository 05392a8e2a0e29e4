"""Cairn watched by a real Prometheus (Debian's package): it scrapes cairn-api (request
metrics and the fleet's gauges, on the API's metrics port), cairn-worker (job outcomes,
durations, bytes) and cairn-scheduler (its loop, the targets' health), and loads Cairn's
alert rules. After one backup that succeeds and one that fails, the queries an operator
would run answer. The API's own port never answers /metrics."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import start_failing_backup
from tests.support.prometheus import Prometheus
from tests.support.redis_server import free_port
from tests.support.stack import REPO, Stack, api_process

pytestmark = pytest.mark.ceph


@pytest.fixture(scope="module")
def api_metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def api(stack: Stack, api_metrics_port: int) -> Iterator[str]:
    """A real cairn-api process (Prometheus scrapes it over TCP) on the stack's database,
    serving its metrics on a port of their own."""
    env = {**stack.env, "CAIRN_API_METRICS_PORT": str(api_metrics_port)}
    with api_process(env, stack.log_dir / "api-metrics.log") as address:
        yield address


@pytest.fixture(scope="module")
def prometheus(stack: Stack, api: str, api_metrics_port: int,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path_factory.mktemp("prometheus"), {
        "cairn-api": f"127.0.0.1:{api_metrics_port}",
        "cairn-worker": f"127.0.0.1:{stack.env['CAIRN_WORKER_METRICS_PORT']}",
        "cairn-scheduler": f"127.0.0.1:{stack.env['CAIRN_SCHEDULER_METRICS_PORT']}",
    })
    server.start()
    yield server
    server.stop()


def _wait_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end: {job}")


def _dashboard_queries() -> list[tuple[str, str]]:
    """The dashboard's queries as Grafana sends them for 'all projects' over a short range."""
    dashboard = json.loads((REPO / "deploy" / "grafana" / "cairn.json").read_text())
    return [(panel["title"], target["expr"].replace("$project", ".*")
             .replace("$__rate_interval", "5m"))
            for panel in dashboard["panels"] for target in panel["targets"]]


def _value(found: list[dict[str, Any]]) -> float:
    assert len(found) == 1, found
    return float(found[0]["value"][1])


def test_prometheus_sees_a_backup_and_a_failed_backup(
        stack: Stack, api: str, prometheus: Prometheus, volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    project = f"metrics-{uuid.uuid4().hex[:8]}"
    client = httpx.Client(base_url=f"http://{api}", timeout=30,
                          headers={"X-Project-Id": project, "X-Roles": "member"})
    good = ceph.unique_name("metrics")
    images.append(good)
    rbd.RBD().create(volumes_pool, good, 5 * MiB + 512)
    with rbd.Image(volumes_pool, good) as image:
        image.write(b"cairn" * 1000, 4 * MiB)
    plan = client.post("/v1/plans", json={"name": "nightly", "volumes": [
        f"ceph-a/volumes/{good}"], "rules": [{"cron": "0 3 * * *"}]})
    assert plan.status_code == 201, plan.text
    # A backup whose volume is gone by the time the worker starts it (the helper restarts
    # the worker, whose counters start again: so this one comes first).
    failing = start_failing_backup(lambda path, body: client.post(path, json=body),
                                   stack.worker, volumes_pool)
    failed = _wait_job(client, failing)
    assert failed["status"] == "failed", failed
    reason = failed["error"]["code"]
    started = client.post("/v1/backups", json={"volume": f"ceph-a/volumes/{good}"})
    assert started.status_code == 202, started.text
    done = _wait_job(client, started.json()["id"])
    assert done["status"] == "succeeded", done

    # Every process is scraped.
    assert prometheus.wait_for('count(up{job=~"cairn-.*"} == 1) == 3'), prometheus.targets()

    # The worker's counts, by project and reason.
    backups = f'cairn_jobs_finished_total{{kind="backup", project="{project}"'
    # (waiting for the value: a success series exists at 0 from its job's start)
    assert _value(prometheus.wait_for(backups + ', outcome="succeeded"} == 1')) == 1
    failures = prometheus.wait_for(backups + ', outcome="failed"} == 1')
    assert _value(failures) == 1
    assert failures[0]["metric"]["reason"] == reason
    assert _value(prometheus.wait_for(
        f'cairn_jobs_started_total{{kind="backup", project="{project}"}} == 2')) == 2
    assert _value(prometheus.query(
        'sum(cairn_job_duration_seconds_count{kind="backup"})')) >= 2
    assert _value(prometheus.query(
        'sum(cairn_job_written_bytes_total{kind="backup", target="local"})')) >= 5000

    # The fleet's gauges, read from the database by cairn-api.
    newest = _value(prometheus.wait_for(
        f'cairn_volume_last_success_timestamp_seconds{{project="{project}"}}'))
    assert abs(newest - time.time()) < 120, newest
    assert _value(prometheus.wait_for(
        f'cairn_plan_expected_interval_seconds{{project="{project}"}}')) == 86400
    assert _value(prometheus.wait_for(
        f'cairn_restore_points{{project="{project}", status="available"}}')) == 1
    assert _value(prometheus.wait_for(f'cairn_stored_bytes{{project="{project}"}}')) > 0
    assert _value(prometheus.query('cairn_fleet_up')) == 1

    # The API's requests by route template, the scheduler's loop and the targets' health.
    assert _value(prometheus.wait_for(
        'sum(cairn_api_requests_total{method="POST", route="/v1/backups", status="202"})')) >= 2
    assert prometheus.wait_for(
        'cairn_api_requests_total{route="/v1/jobs/{job_id}", status="200"}')
    tick = _value(prometheus.wait_for('cairn_scheduler_last_tick_timestamp_seconds'))
    assert abs(tick - time.time()) < 30, tick
    assert _value(prometheus.wait_for('cairn_target_up{target="local"}')) == 1

    # The failed backup fires its alert, the successful one leaves the volume fresh.
    firing = prometheus.wait_for(
        f'ALERTS{{alertname="CairnBackupsFailing", project="{project}", '
        'alertstate="firing"}')
    assert firing, prometheus.query("ALERTS")
    assert firing[0]["metric"]["reason"] == reason, firing
    assert not prometheus.query(
        f'ALERTS{{alertname="CairnRestorePointStale", project="{project}"}}')

    # Every query of the Grafana dashboard runs, and the panels about what just happened
    # show it.
    # (rates need two samples of a series: the panels fill within a few scrapes)
    shown = {"Backups and restores by outcome", "Bytes written by target", "Stored",
             "Restore point age, in plan intervals", "API requests by status",
             "Failed backups by reason (1 h)"}
    for title, expr in _dashboard_queries():
        prometheus.query(expr)  # raises on a query Prometheus refuses
        if title in shown:
            assert prometheus.wait_for(expr), f"dashboard panel {title!r} is empty: {expr}"

    # No job id is ever a label value.
    job_ids = {done["id"], failed["id"]}
    for series in prometheus.query('{__name__=~"cairn_.+"}'):
        assert not job_ids & set(series["metric"].values()), series


@pytest.mark.production_database_only
def test_the_api_port_never_answers_metrics(stack: Stack, api: str,
                                            api_metrics_port: int) -> None:
    """The fleet's gauges name every tenant's projects, plans and volumes: whoever reaches
    the API (an Ingress that serves `/`, any pod) must not read them, whatever address it
    claims. They are on the metrics port only, which a NetworkPolicy opens to Prometheus."""
    for headers in ({}, {"X-Forwarded-For": "127.0.0.1"}, {"X-Real-IP": "127.0.0.1"},
                    {"X-Project-Id": "metrics", "X-Roles": "admin"}):
        for path in ("/metrics", "/metrics/", "/metrics?name[]=cairn_fleet_up"):
            answer = httpx.get(f"http://{api}{path}", headers=headers, timeout=10)
            assert answer.status_code == 404, (path, headers, answer.text[:300])
            assert "cairn_" not in answer.text
    scraped = httpx.get(f"http://127.0.0.1:{api_metrics_port}/metrics", timeout=10)
    assert scraped.status_code == 200
    assert "cairn_fleet_up 1.0" in scraped.text
    assert "cairn_api_requests_total" in scraped.text
