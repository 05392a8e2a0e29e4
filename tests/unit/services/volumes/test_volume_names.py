"""Jobs and restore points name a Cinder volume as its tenant does: the name Cairn learnt
when the volume was last named for a backup or a plan, in lists and single answers alike."""

from __future__ import annotations

from datetime import UTC, datetime

from services.context import RequestContext
from services.db import Database
from services.jobs import repository as jobs
from services.jobs.factory import Qos, backup
from services.jobs.schemas import JobPublic
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.restore_points import repository as points
from services.restore_points.schemas import RestorePointPublic
from services.status import RestorePointKind
from services.storage.refs import ImageRef
from services.volumes import repository as volumes

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
CINDER = "3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41"
REF = ImageRef("ceph-a", "volumes", f"volume-{CINDER}")
CTX = RequestContext(project_id="p")


def test_a_volume_keeps_the_name_it_was_last_given(db: Database) -> None:
    with db.session() as session:
        first = volumes.get_or_create(session, "p", REF, cinder_volume_id=CINDER, name="db")
        assert first.name == "db"
        # Named again without a name (an RBD ref): the Cinder name stays.
        assert volumes.get_or_create(session, "p", REF).name == "db"
        assert volumes.get_or_create(session, "p", REF, cinder_volume_id=CINDER,
                                     name="db-primary").name == "db-primary"


def test_jobs_and_restore_points_carry_the_volumes_name(db: Database) -> None:
    with db.session() as session:
        volume = volumes.get_or_create(session, "p", REF, cinder_volume_id=CINDER, name="db")
        plain = volumes.get_or_create(session, "p", ImageRef("ceph-a", "volumes", "demo"))
        session.flush()
        for made in (volume, plain):
            session.add(RestorePoint(id=f"rp-{made.image}", project_id="p",
                                     volume_id=made.id, target="local",
                                     kind=RestorePointKind.FULL, created_at=NOW))
            session.add(Job(**backup(project_id="p", volume_id=made.id, target="local",
                               kind=RestorePointKind.FULL, restore_point_id=None,
                               max_attempts=1, qos=Qos(), now=NOW)))
    with db.session() as session:
        rows, _ = points.list_page(session, CTX, volume_id=None, limit=10, marker=None)
        listed = {RestorePointPublic.of(r, r.volume_ref, r.volume_name).volume: r.volume_name
                  for r in rows}
        assert listed == {str(REF): "db", "ceph-a/volumes/demo": None}
        one = RestorePointPublic.of(points.get(session, CTX, f"rp-{REF.image}"))
        assert (one.volume, one.volume_name) == (str(REF), "db")
        job_rows, _ = jobs.list_page(session, CTX, jobs.JobFilter(), limit=10, marker=None)
        assert {JobPublic.of(j, j.volume_ref, j.volume_name).volume_name
                for j in job_rows} == {"db", None}
        job = jobs.get(session, CTX, next(j.id for j in job_rows if j.volume_name))
        assert JobPublic.of(job).volume_name == "db"
