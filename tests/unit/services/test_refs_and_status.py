from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import select, text

from services.db import Database
from services.errors import InvalidInput, InvalidStatusTransition
from services.records import Base, EventDelivery, Job
from services.records.groups import group_name, group_snapshot_name
from services.records.restore_points import (
    backup_image_name,
    checkpoint_object_name,
    manifest_object_name,
    snapshot_name,
)
from services.restore_points.instant import instant_image_name
from services.status import (
    DELIVERY_TRANSITIONS,
    JOB_TRANSITIONS,
    DeliveryStatus,
    JobKind,
    JobStatus,
    guarded_update,
    sources_of,
)
from services.storage.refs import ImageRef, parse_image_ref, require_unreserved


def test_parse_full_ref() -> None:
    assert parse_image_ref("ceph-a/volumes/vol.1", field="volume") == \
        ImageRef("ceph-a", "volumes", "vol.1")


@pytest.mark.parametrize("text", ["volumes/x", "x", "a/b/c/d", "a//c", "a/b/c d", "a/b/-x"])
def test_bad_refs_name_the_field_and_the_shape(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"volume .*cluster/pool/image"):
        parse_image_ref(text, field="volume")


def test_defaults_fill_short_refs() -> None:
    assert parse_image_ref("img", field="target", default_cluster="c", default_pool="p") == \
        ImageRef("c", "p", "img")
    assert parse_image_ref("q/img", field="target", default_cluster="c", default_pool="p") == \
        ImageRef("c", "q", "img")


def test_sources_of() -> None:
    assert set(sources_of(JOB_TRANSITIONS, JobStatus.RUNNING)) == {JobStatus.QUEUED}
    assert set(sources_of(JOB_TRANSITIONS, JobStatus.QUEUED)) == {JobStatus.RUNNING}


def test_guarded_update_lets_only_one_caller_win(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 't.db'}")
    Base.metadata.create_all(db.engine)
    with db.session() as session:
        job = Job(project_id="p", kind=JobKind.BACKUP)
        session.add(job)
    with db.session() as session:
        assert guarded_update(session, Job, job.id, JOB_TRANSITIONS, JobStatus.RUNNING,
                              expect=JobStatus.QUEUED)
    with db.session() as session:
        # A duplicate delivery finds the job running and does nothing.
        assert not guarded_update(session, Job, job.id, JOB_TRANSITIONS, JobStatus.RUNNING,
                                  expect=JobStatus.QUEUED)
        # A finished job cannot be finished again.
        assert guarded_update(session, Job, job.id, JOB_TRANSITIONS, JobStatus.SUCCEEDED)
        assert not guarded_update(session, Job, job.id, JOB_TRANSITIONS, JobStatus.FAILED)
    with db.session() as session:
        assert session.scalars(select(Job.status)).one() == JobStatus.SUCCEEDED
    db.dispose()


def test_a_delivery_ends_once_and_stays_ended(db: Database) -> None:
    assert set(sources_of(DELIVERY_TRANSITIONS, DeliveryStatus.SUCCEEDED)) == {
        DeliveryStatus.PENDING}
    assert set(sources_of(DELIVERY_TRANSITIONS, DeliveryStatus.FAILED)) == {
        DeliveryStatus.PENDING}
    assert sources_of(DELIVERY_TRANSITIONS, DeliveryStatus.PENDING) == []
    with db.session() as session:
        session.add_all([EventDelivery(id=name, webhook_id=None, event_type="webhook.test",
                                       body="{}") for name in ("sent", "given-up")])
    with db.session() as session:
        assert guarded_update(session, EventDelivery, "sent", DELIVERY_TRANSITIONS,
                              DeliveryStatus.SUCCEEDED, expect=DeliveryStatus.PENDING)
        assert guarded_update(session, EventDelivery, "given-up", DELIVERY_TRANSITIONS,
                              DeliveryStatus.FAILED)
    with db.session() as session:
        # A late attempt's answer, a give-up racing a success, a retry: nothing moves an
        # ended delivery, and asking for such a move by name is a programming error.
        for delivery_id in ("sent", "given-up"):
            for to in DeliveryStatus:
                assert not guarded_update(session, EventDelivery, delivery_id,
                                          DELIVERY_TRANSITIONS, to)
        with pytest.raises(InvalidStatusTransition):
            guarded_update(session, EventDelivery, "sent", DELIVERY_TRANSITIONS,
                           DeliveryStatus.FAILED, expect=DeliveryStatus.SUCCEEDED)
    with db.session() as session:
        # The column holds the same strings as before the enum: no migration.
        stored = dict(session.execute(text("SELECT id, status FROM event_deliveries")).all())
    assert stored == {"sent": "succeeded", "given-up": "failed"}


def test_every_name_cairn_gives_its_own_objects_is_reserved() -> None:
    rp, volume = str(uuid.uuid4()), str(uuid.uuid4())
    for name in (snapshot_name(rp), backup_image_name(volume), manifest_object_name(rp),
                 checkpoint_object_name(rp), instant_image_name(rp), group_snapshot_name(rp),
                 group_name(rp)):
        with pytest.raises(InvalidInput, match="Cairn's own"):
            require_unreserved(ImageRef("c", "p", name), field="target")


@pytest.mark.parametrize("image", ["restored", "Cairn.x", "my-cairn.x", "cairn", "cairn-x",
                                   "volume-3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41"])
def test_other_names_are_the_callers(image: str) -> None:
    assert require_unreserved(ImageRef("c", "p", image), field="target").image == image
