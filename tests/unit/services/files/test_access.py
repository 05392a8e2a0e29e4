"""Which restore points a file request reads: a tenant's own available ones only, another
project's exactly as missing ones, and a versions request the volume's newest available
restore points, newest first (on a real SQLite)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.context import RequestContext
from services.db import Database
from services.errors import RestorePointNotFound, RestorePointNotReadable, VolumeNotFound
from services.files.access import readable, version_sources
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RestorePointStatus

START = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
OWNER = RequestContext(project_id="p", roles=frozenset({"reader"}))
STRANGER = RequestContext(project_id="q", roles=frozenset({"admin"}))
"""The admin of another project: not the cloud's administrator."""
CLOUD_ADMIN = RequestContext(project_id="admin", roles=frozenset({"admin"}), cloud_admin=True)


def _volume(db: Database, project: str = "p", cinder: str | None = None) -> str:
    with db.session() as session:
        volume = Volume(project_id=project, cluster="ceph-a", pool="volumes",
                        image=f"img-{cinder or project}", cinder_volume_id=cinder)
        session.add(volume)
        session.flush()
        return volume.id


def _restore_points(db: Database, volume_id: str, statuses: list[RestorePointStatus],
                    project: str = "p") -> list[str]:
    """One restore point per status, an hour apart, oldest first."""
    ids = []
    with db.session() as session:
        for n, status in enumerate(statuses):
            rp = RestorePoint(project_id=project, volume_id=volume_id, target="local",
                              status=status, created_at=START + timedelta(hours=n))
            session.add(rp)
            session.flush()
            ids.append(rp.id)
    return ids


def test_only_the_owner_and_the_cloud_admin_read_a_restore_point(db: Database) -> None:
    [rp_id] = _restore_points(db, _volume(db), [RestorePointStatus.AVAILABLE])
    with db.reading() as session:
        assert readable(session, OWNER, rp_id).id == rp_id
        assert readable(session, CLOUD_ADMIN, rp_id).id == rp_id
        with pytest.raises(RestorePointNotFound) as other:
            readable(session, STRANGER, rp_id)
        with pytest.raises(RestorePointNotFound) as missing:
            readable(session, STRANGER, "3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41")
    # Nothing tells another project's restore point from one that does not exist.
    assert other.value.message.replace(rp_id, "ID") == \
        missing.value.message.replace("3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41", "ID")


@pytest.mark.parametrize("status", [RestorePointStatus.CREATING, RestorePointStatus.ERROR,
                                    RestorePointStatus.DELETING])
def test_a_restore_point_not_available_is_a_conflict_naming_its_status(
        db: Database, status: RestorePointStatus) -> None:
    [rp_id] = _restore_points(db, _volume(db), [status])
    with db.reading() as session, pytest.raises(RestorePointNotReadable) as refused:
        readable(session, OWNER, rp_id)
    assert refused.value.status_code == 409
    assert status.value in refused.value.message
    assert refused.value.details["status"] == status.value


def test_a_deleted_restore_point_is_not_found(db: Database) -> None:
    [rp_id] = _restore_points(db, _volume(db), [RestorePointStatus.DELETED])
    with db.reading() as session, pytest.raises(RestorePointNotFound):
        readable(session, OWNER, rp_id)


def test_versions_cover_the_newest_available_restore_points_newest_first(
        db: Database) -> None:
    volume_id = _volume(db, cinder="5a1d0c3e-0000-4000-8000-00000000000a")
    available = RestorePointStatus.AVAILABLE
    ids = _restore_points(db, volume_id, [available, available, RestorePointStatus.ERROR,
                                          available, RestorePointStatus.CREATING, available])
    _restore_points(db, _volume(db, project="p", cinder=None), [available])  # another volume
    with db.reading() as session:
        assert version_sources(session, OWNER, volume_id, 30) == [
            ids[5], ids[3], ids[1], ids[0]]
        assert version_sources(session, OWNER, volume_id, 2) == [ids[5], ids[3]]
        # By its Cinder id as well, in any case.
        assert version_sources(session, OWNER, "5A1D0C3E-0000-4000-8000-00000000000A",
                               1) == [ids[5]]
        assert version_sources(session, CLOUD_ADMIN, volume_id, 1) == [ids[5]]


def test_another_projects_volume_is_not_found(db: Database) -> None:
    volume_id = _volume(db)
    _restore_points(db, volume_id, [RestorePointStatus.AVAILABLE])
    with db.reading() as session, pytest.raises(VolumeNotFound):
        version_sources(session, STRANGER, volume_id, 30)


def test_a_volume_without_available_restore_points_has_no_versions(db: Database) -> None:
    volume_id = _volume(db)
    _restore_points(db, volume_id, [RestorePointStatus.CREATING])
    with db.reading() as session:
        assert version_sources(session, OWNER, volume_id, 30) == []
