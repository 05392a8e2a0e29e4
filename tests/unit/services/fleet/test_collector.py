"""The fleet's gauges as Prometheus reads them, from rows on a real SQLite: what a volume's
recovery point and its plan's interval say, what is counted and what is left out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client.core import Metric

from services.db import Database
from services.fleet.collector import FleetCollector, expected_interval
from services.records.jobs import Job
from services.records.plans import Plan, PlanVolume, StoredRule
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.settings import Settings
from services.status import (
    JobKind,
    JobStatus,
    PlanStatus,
    RestorePointStatus,
    VerifyStatus,
)

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)  # a Monday
DAY = timedelta(days=1)
S3 = {"endpoint": "http://127.0.0.1:1", "bucket": "b", "credentials_file": "/nonexistent"}
SETTINGS = Settings(auth_strategy="noauth", environment="development",
                    clusters={"ceph-a": {"conf": "/etc/ceph/ceph.conf"}},
                    backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"},
                                    "slow": {"cluster": "ceph-a", "pool": "b2", "max_jobs": 1}},
                    object_targets={"s3": {**S3, "max_jobs": 3},
                                    "s3-idle": {**S3, "prefix": "idle"}},
                    max_jobs_per_target=4)


def _samples(db: Database) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    family: Metric
    for family in FleetCollector(db, SETTINGS, lambda: NOW).collect():
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = (
                sample.value)
    return found


def _plan(plan_id: str, project: str, cron: str, *, status: PlanStatus = PlanStatus.ENABLED,
          created: datetime = NOW - 30 * DAY) -> Plan:
    return Plan(id=plan_id, project_id=project, name=plan_id, target="local", timezone="UTC",
                status=status, created_at=created, updated_at=created,
                rules=[StoredRule(cron=cron)], retention={})


def _volume(volume_id: str, project: str, *, cinder: str | None = None) -> Volume:
    return Volume(id=volume_id, project_id=project, cluster="ceph-a", pool="volumes",
                  image=f"img-{volume_id}", cinder_volume_id=cinder,
                  created_at=NOW - 40 * DAY)


def _point(volume_id: str, project: str, status: RestorePointStatus, completed: datetime,
           *, size: int = 100, corrupt: bool = False) -> RestorePoint:
    return RestorePoint(project_id=project, volume_id=volume_id, target="local",
                        status=status, created_at=completed - timedelta(minutes=5),
                        completed_at=completed, bytes_copied=size, quota_bytes=size,
                        verify_status=VerifyStatus.CORRUPT if corrupt else None)


def test_the_interval_is_the_longest_gap_between_slots() -> None:
    monday = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
    weekdays = [monday + i * DAY for i in (0, 1, 2, 3, 4, 7, 8)]
    assert expected_interval(weekdays) == 3 * DAY
    assert expected_interval([monday, monday + DAY]) == DAY
    assert expected_interval([monday]) is None
    assert expected_interval([]) is None


def test_recovery_points_of_enabled_plans(db: Database) -> None:
    with db.session() as session:
        session.add_all([
            _volume("v1", "p1", cinder="7f0c2e2a-4a52-4c57-9c1e-0d6c1a0b5e11"),
            _volume("v2", "p1"), _volume("v3", "p2"),
            _plan("daily", "p1", "0 3 * * *"),
            _plan("weekdays", "p1", "0 3 * * 1-5"),
            _plan("paused", "p2", "0 3 * * *", status=PlanStatus.PAUSED)])
        session.flush()
        session.add_all([
            PlanVolume(plan_id="daily", volume_id="v1"),
            PlanVolume(plan_id="weekdays", volume_id="v2"),
            PlanVolume(plan_id="paused", volume_id="v3"),
            # v1: the newest available one counts, not a newer failed or deleted one.
            _point("v1", "p1", RestorePointStatus.AVAILABLE, NOW - 2 * DAY),
            _point("v1", "p1", RestorePointStatus.AVAILABLE, NOW - DAY),
            _point("v1", "p1", RestorePointStatus.ERROR, NOW - timedelta(hours=1)),
            _point("v1", "p1", RestorePointStatus.DELETED, NOW - timedelta(hours=2)),
            _point("v3", "p2", RestorePointStatus.AVAILABLE, NOW - 9 * DAY)])
    found = _samples(db)

    last = found["cairn_volume_last_success_timestamp_seconds"]
    assert last == {
        # named by its Cinder id when it has one
        (("plan", "daily"), ("project", "p1"),
         ("volume", "7f0c2e2a-4a52-4c57-9c1e-0d6c1a0b5e11")): (NOW - DAY).timestamp(),
        # never backed up: counted from when the plan (newer than the volume) began, so a
        # volume that never got a restore point goes stale too
        (("plan", "weekdays"), ("project", "p1"), ("volume", "ceph-a/volumes/img-v2")):
            (NOW - 30 * DAY).timestamp(),
    }  # the paused plan's volume is not expected to be fresh
    assert found["cairn_plan_expected_interval_seconds"] == {
        (("plan", "daily"), ("project", "p1")): DAY.total_seconds(),
        (("plan", "weekdays"), ("project", "p1")): 3 * DAY.total_seconds(),
    }
    assert found["cairn_fleet_up"] == {(): 1.0}


def test_jobs_slots_restore_points_and_storage(db: Database) -> None:
    with db.session() as session:
        session.add_all([_volume("v1", "p1"), _volume("v2", "p2")])
        session.flush()
        session.add_all([
            Job(project_id="p1", kind=JobKind.BACKUP, status=JobStatus.RUNNING, target="local"),
            Job(project_id="p1", kind=JobKind.BACKUP, status=JobStatus.RUNNING, target="local"),
            Job(project_id="p2", kind=JobKind.RESTORE, status=JobStatus.RUNNING, target="slow"),
            Job(project_id="p2", kind=JobKind.COPY, status=JobStatus.RUNNING, target="s3"),
            Job(project_id="p2", kind=JobKind.BACKUP, status=JobStatus.QUEUED, target="local"),
            Job(project_id="p2", kind=JobKind.BACKUP, status=JobStatus.SUCCEEDED,
                target="local"),
            _point("v1", "p1", RestorePointStatus.AVAILABLE, NOW, size=1000),
            _point("v1", "p1", RestorePointStatus.AVAILABLE, NOW, size=24, corrupt=True),
            _point("v1", "p1", RestorePointStatus.DELETED, NOW, size=5000, corrupt=True),
            _point("v2", "p2", RestorePointStatus.ERROR, NOW, size=0)])
    found = _samples(db)

    jobs = found["cairn_jobs"]
    assert jobs[(("kind", "backup"), ("status", "running"))] == 2
    assert jobs[(("kind", "backup"), ("status", "queued"))] == 1
    assert jobs[(("kind", "restore"), ("status", "running"))] == 1
    assert jobs[(("kind", "verify"), ("status", "queued"))] == 0  # every kind, even idle
    assert found["cairn_target_slots_in_use"] == {
        (("project", "p1"), ("target", "local")): 2, (("project", "p2"), ("target", "slow")): 1,
        (("project", "p2"), ("target", "s3")): 1}
    # Every configured target has its slots, whatever its kind and whether it is busy: an
    # object target's own limit, or the service-wide one.
    assert found["cairn_target_slots"] == {
        (("target", "local"),): 4, (("target", "slow"),): 1,
        (("target", "s3"),): 3, (("target", "s3-idle"),): 4}
    assert found["cairn_restore_points"] == {
        (("project", "p1"), ("status", "available")): 2,
        (("project", "p2"), ("status", "error")): 1}
    assert found["cairn_stored_bytes"] == {(("project", "p1"),): 1024, (("project", "p2"),): 0}
    assert found["cairn_restore_points_corrupt"] == {(("project", "p1"),): 1}


def test_a_database_away_leaves_the_scrape_answering() -> None:
    broken = Database("sqlite:////nonexistent-dir/cairn.db")
    found = _samples(broken)
    assert found["cairn_fleet_up"] == {(): 0.0}
    assert "cairn_jobs" not in found
    broken.dispose()
