"""A Cairn without Cinder lists the RBD images of its volume pools as the project's volumes:
by `cluster/pool/image`, a page at a time, never Cairn's own images, with their protection
read from the same rows a Cinder volume's is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from services.context import RequestContext
from services.db import Database
from services.errors import Forbidden, InvalidInput, VolumeNotFound
from services.records.plans import Plan, PlanVolume, StoredRule
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import PlanStatus, RestorePointStatus
from services.storage import rbd_images
from services.volumes.protection import list_volumes
from services.volumes.rbd_volumes import RbdVolumes

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
MiB = 1 << 20
NOAUTH = RequestContext(project_id="demo")

POOLS = {
    ("ceph-a", "volumes"): {"demo": 64 * MiB, "web-1": 2048 * MiB,
                            "cairn.vol.0f3c": MiB, "cairn-instant-9a": MiB,
                            "has space": MiB, "gone": None},
    ("ceph-a", "other"): {"not-listed": MiB},
    ("ceph-b", "rbd"): {"db": 10 * MiB},
}


class _Clusters:
    @contextmanager
    def ioctx(self, cluster: str, pool: str) -> Iterator[tuple[str, str]]:
        yield cluster, pool


@pytest.fixture(autouse=True)
def _images(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rbd_images, "image_names", lambda io: list(POOLS[io]))
    monkeypatch.setattr(rbd_images, "image_size", lambda io, name: POOLS[io][name])


def _source(pools: dict[str, list[str]] | None = None) -> RbdVolumes:
    clusters: Any = _Clusters()
    return RbdVolumes(clusters, {"ceph-a": ["volumes"], "ceph-b": ["rbd"]}
                      if pools is None else pools)


def test_lists_the_images_of_the_volume_pools_by_ref_never_cairns_own() -> None:
    page = _source().page(NOAUTH, limit=10, marker=None)
    assert [(v.id, v.name, v.size_bytes) for v in page.volumes] == [
        ("ceph-a/volumes/demo", "demo", 64 * MiB),
        ("ceph-a/volumes/web-1", "web-1", 2048 * MiB),
        ("ceph-b/rbd/db", "db", 10 * MiB)]
    assert page.next_marker is None


def test_pages_follow_the_marker_and_skip_an_image_removed_since_listed() -> None:
    source = _source()
    first = source.page(NOAUTH, limit=2, marker=None)
    # "gone" was listed, then removed: not shown, but the next page starts after it.
    assert [v.id for v in first.volumes] == ["ceph-a/volumes/demo"]
    assert first.next_marker == first.last_read == "ceph-a/volumes/gone"
    second = source.page(NOAUTH, limit=2, marker=first.next_marker)
    assert [v.id for v in second.volumes] == ["ceph-a/volumes/web-1", "ceph-b/rbd/db"]
    assert second.next_marker is None


def test_a_marker_outside_the_volume_pools_is_refused() -> None:
    assert _source().check_marker(NOAUTH, "ceph-a/volumes/demo") == "ceph-a/volumes/demo"
    with pytest.raises(InvalidInput, match="marker"):
        _source().check_marker(NOAUTH, "ceph-a/other/not-listed")


def test_one_volume_only_from_the_volume_pools() -> None:
    assert _source().one(NOAUTH, "ceph-b/rbd/db").size_bytes == 10 * MiB
    for outside in ("ceph-a/other/not-listed", "ceph-a/volumes/cairn.vol.0f3c",
                    "ceph-a/volumes/gone"):
        with pytest.raises(VolumeNotFound):
            _source().one(NOAUTH, outside)


def test_under_keystone_only_the_clouds_administrator_lists_images() -> None:
    member = RequestContext(project_id="p", token="t", roles=frozenset({"member"}))
    with pytest.raises(Forbidden, match="only administrators"):
        _source().page(member, limit=10, marker=None)
    admin = RequestContext(project_id="p", token="t", cloud_admin=True)
    assert len(_source().page(admin, limit=10, marker=None).volumes) == 3


def test_without_volume_pools_the_answer_says_what_to_configure() -> None:
    with pytest.raises(InvalidInput, match="CAIRN_VOLUME_POOLS"):
        _source({}).page(NOAUTH, limit=10, marker=None)


def test_the_list_shows_each_images_protection(db: Database) -> None:
    with db.session() as session:
        session.add_all([
            Volume(id="v-demo", project_id="demo", cluster="ceph-a", pool="volumes",
                   image="demo"),
            # The same image protected by another project: not this one's protection.
            Volume(id="v-other", project_id="other", cluster="ceph-a", pool="volumes",
                   image="web-1"),
            Plan(id="nightly", project_id="demo", name="nightly", target="local",
                 timezone="UTC", status=PlanStatus.ENABLED, created_at=NOW, updated_at=NOW,
                 rules=[StoredRule(cron="0 3 * * *")], retention={}),
            RestorePoint(id="rp", project_id="demo", volume_id="v-demo", target="local",
                         status=RestorePointStatus.AVAILABLE,
                         created_at=NOW - timedelta(hours=1)),
        ])
        session.flush()
        session.add(PlanVolume(plan_id="nightly", volume_id="v-demo"))
    with db.session() as session:
        listed = list_volumes(session, NOAUTH, _source(), NOW, limit=10, marker=None)
        unprotected = list_volumes(session, NOAUTH, _source(), NOW, limit=10, marker=None,
                                   unprotected=True)
    demo, web, db_image = listed.volumes
    assert (demo.protected, [p.name for p in demo.plans], demo.restore_points) == (
        True, ["nightly"], 1)
    assert demo.newest_restore_point is not None
    assert demo.newest_restore_point.age_seconds == 3600
    assert (demo.size_gb, demo.size_bytes, demo.kind) == (1, 64 * MiB, "rbd_image")
    assert (web.protected, web.restore_points) == (False, 0)
    assert [v.id for v in unprotected.volumes] == [web.id, db_image.id]
