"""What a user is told about an instant restore without touching Ceph: a restore in place
cannot be instant, and a restore point pinned by one says why and until when."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from services.records.jobs import Job
from services.restore_points.instant import instant_image_name, pinned_by_instant_restore
from services.restore_points.schemas import RestoreCreate
from services.status import RestoreMethod

MiB = 1 << 20


def test_an_instant_restore_in_place_is_refused_with_the_way_out() -> None:
    with pytest.raises(ValidationError, match="always a copy"):
        RestoreCreate(volume_id="5f0c2a64-54b5-4d8b-9bb6-2f3f1c3f6d1e", mode="instant")
    assert RestoreCreate(new_volume={"name": "n"}, mode="instant").mode == RestoreMethod.INSTANT
    assert RestoreCreate(target="img").mode == RestoreMethod.COPY


def test_a_pinned_restore_point_says_how_far_the_flatten_is_and_how_long_is_left() -> None:
    job = Job(id="job-1", restore_cinder_volume_id="vol-9", restore_target="a/volumes/x",
              ready_at=datetime(2026, 11, 24, tzinfo=UTC), bytes_total=400 * MiB,
              bytes_done=100 * MiB, rate_bytes_per_second=1 * MiB)
    message = pinned_by_instant_restore("rp-1", job)
    assert "Cinder volume vol-9" in message
    assert "job-1" in message
    assert "25 % done" in message
    assert "about 5 min left" in message


def test_before_the_volume_is_ready_it_says_the_restore_is_under_way() -> None:
    job = Job(id="job-2", restore_target="ceph-a/volumes/new", ready_at=None)
    message = pinned_by_instant_restore("rp-1", job)
    assert "image ceph-a/volumes/new" in message
    assert "being restored instantly" in message


def test_the_clone_name_leads_back_to_its_job() -> None:
    assert instant_image_name("abc") == "cairn-instant-abc"

