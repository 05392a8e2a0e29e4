"""Asking for a restore: the job written is the whole restore the worker will run (where it
writes, how, the volume made for it naming the job), it starts only after the commit, and
a destination refused leaves no job and nothing started (on a real SQLite, with Ceph and
Cinder faked at their edges)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from services.context import RequestContext
from services.db import Database
from services.errors import ImageExists, VolumeInUse
from services.jobs.submit import hand_over_after_commit
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points import service
from services.restore_points.schemas import NewVolume, RestoreCreate
from services.settings import Settings
from services.status import RestoreMethod, RestoreMode, RestorePointKind, RestorePointStatus
from services.storage.refs import ImageRef

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SETTINGS = Settings(auth_strategy="noauth", environment="development",
                    clusters={"ceph-a": {"conf": "/etc/ceph/ceph.conf"}},
                    backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"}})
CALLER = RequestContext(project_id="p", token="token-of-p")
"""A tenant with a Keystone token: restores into Cinder volumes."""


class Clusters:
    """Ceph as the destination checks see it: one cluster, one pool."""

    def check_known(self, cluster: str, *, field: str) -> None:
        assert cluster == "ceph-a"

    def pool_exists(self, cluster: str, pool: str) -> bool:
        return pool == "volumes"


@dataclass
class Cinder:
    """What start_restore asks of Cinder: volumes made with the caller's token, types."""

    created: list[dict[str, Any]] = field(default_factory=list)
    settings: Any = field(default_factory=lambda: SimpleNamespace(cluster="ceph-a",
                                                                  pool="volumes"))

    def for_user(self, ctx: RequestContext) -> Cinder:
        return self

    def as_service_in(self, project_id: str) -> Cinder:
        return self

    def unbudgeted(self) -> Cinder:
        return self

    def default_volume_type_id(self) -> str:
        return "type-default"

    def create(self, **spec: Any) -> SimpleNamespace:
        self.created.append(spec)
        return SimpleNamespace(id=f"vol-{len(self.created)}")

    def discard(self, volume_id: str) -> None:
        raise AssertionError("nothing rolled back here")

    def image_ref(self, volume_id: str) -> ImageRef:
        return ImageRef("ceph-a", "volumes", f"volume-{volume_id}")


@pytest.fixture
def started(db: Database) -> list[list[str]]:
    calls: list[list[str]] = []
    hand_over_after_commit(db.sessions, calls.append)
    with db.session() as session:
        session.add(Volume(id="v1", project_id="p", cluster="ceph-a", pool="volumes",
                           image="img", created_at=NOW))
        session.add(RestorePoint(id="rp1", project_id="p", volume_id="v1", target="local",
                                 kind=RestorePointKind.FULL, size_bytes=1 << 30,
                                 status=RestorePointStatus.AVAILABLE, created_at=NOW))
    return calls


def _restore(db: Database, request: RestoreCreate, cinder: Cinder | None = None,
             ctx: RequestContext = CALLER) -> Job:
    with db.session() as session:
        return service.start_restore(session, ctx, SETTINGS, Clusters(),  # type: ignore[arg-type]
                                     cinder, "rp1", request)  # type: ignore[arg-type]


def _stored(db: Database, job_id: str) -> tuple[Any, ...]:
    with db.session() as session:
        job = session.get_one(Job, job_id)
        return (job.restore_target, job.restore_mode, job.restore_cinder_volume_id,
                job.restore_method, job.restore_volume_spec)


def test_a_new_volume_names_the_job_that_restores_into_it(
        db: Database, started: list[list[str]]) -> None:
    cinder = Cinder()
    job = _restore(db, RestoreCreate(new_volume=NewVolume(name="back")), cinder)
    assert started == [[job.id]]
    assert cinder.created[0]["metadata"] == {"cairn_restore_point": "rp1",
                                             "cairn_restore_job": job.id}
    assert _stored(db, job.id) == ("ceph-a/volumes/volume-vol-1", RestoreMode.NEW_VOLUME,
                                   "vol-1", RestoreMethod.COPY, None)


def test_an_instant_restore_into_a_new_volume_clones_under_its_jobs_name(
        db: Database, started: list[list[str]]) -> None:
    job = _restore(db, RestoreCreate(new_volume=NewVolume(name="back"),
                                     mode=RestoreMethod.INSTANT), Cinder())
    assert started == [[job.id]]
    target, mode, volume_id, method, spec = _stored(db, job.id)
    assert (target, mode, volume_id, method) == (
        f"ceph-a/volumes/cairn-instant-{job.id}", RestoreMode.NEW_VOLUME, None,
        RestoreMethod.INSTANT)
    assert json.loads(spec)["volume_type"] == "type-default"


def test_an_administrator_restores_into_a_new_rbd_image(
        db: Database, started: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service.rbd_images, "image_exists", lambda clusters, ref: False)
    admin = RequestContext(project_id="p", token="token", cloud_admin=True)
    job = _restore(db, RestoreCreate(target="back", mode=RestoreMethod.INSTANT), ctx=admin)
    assert started == [[job.id]]
    assert _stored(db, job.id) == ("ceph-a/volumes/back", None, None, RestoreMethod.INSTANT,
                                   None)


def test_an_image_that_exists_is_refused_with_no_job_left_and_none_started(
        db: Database, started: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service.rbd_images, "image_exists", lambda clusters, ref: True)
    with pytest.raises(ImageExists, match="already exists"):
        _restore(db, RestoreCreate(target="back"), ctx=RequestContext(project_id="p"))
    with db.session() as session:
        assert list(session.scalars(select(Job))) == []
    assert started == []


@dataclass
class HeldVolume(Cinder):
    """Cinder with one volume of project p, in the status Cinder's backup API gives it."""

    status: str = "restoring-backup"

    def get(self, volume_id: str) -> SimpleNamespace:
        return SimpleNamespace(id=volume_id, project_id="p", status=self.status, size_gb=1,
                               attached_to=[])


CINDER_VOLUME = "5f0c2a64-54b5-4d8b-9bb6-2f3f1c3f6d1e"


def test_a_restore_for_cinders_backup_service_writes_over_the_volume_it_holds(
        db: Database, started: list[list[str]]) -> None:
    """Cairn's Cinder backup driver: the volume is `restoring-backup`, not `available`, and
    the job says so, so the worker neither takes it from Cinder nor gives it back."""
    admin = RequestContext(project_id="admin", token="token", cloud_admin=True)
    job = _restore(db, RestoreCreate(volume_id=CINDER_VOLUME, cinder_backup=True),
                   HeldVolume(), ctx=admin)
    assert started == [[job.id]]
    assert _stored(db, job.id) == (f"ceph-a/volumes/volume-{CINDER_VOLUME}",
                                   RestoreMode.CINDER_BACKUP, CINDER_VOLUME,
                                   RestoreMethod.COPY, None)


def test_a_restore_for_cinders_backup_service_needs_the_volume_cinder_holds(
        db: Database, started: list[list[str]]) -> None:
    admin = RequestContext(project_id="admin", token="token", cloud_admin=True)
    with pytest.raises(VolumeInUse, match="is available, not restoring-backup"):
        _restore(db, RestoreCreate(volume_id=CINDER_VOLUME, cinder_backup=True),
                 HeldVolume(status="available"), ctx=admin)
    assert started == []


def test_cinder_backup_names_the_held_volume_with_volume_id() -> None:
    with pytest.raises(ValidationError, match="give it with volume_id"):
        RestoreCreate(new_volume=NewVolume(name="n"), cinder_backup=True)
