"""A project's admin stays in its project (issue 31, item 3). Cinder's default policy shows
the `admin` role of any project every project's volumes and groups; before, project A's
admin could back up, protect and restore over project B's volumes through Cairn (202, and
the job and restore point made in B's project, on B's quota, announced to B's webhooks).
Now each answers exactly as a missing volume does, and nothing is written in either
project; the cloud's administrator still works on B's volumes as docs/openstack.md says."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import rbd
import sqlalchemy
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from services.records.jobs import Job
from services.records.plans import Plan
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from tests.integration.openstack.conftest import Protected
from tests.support import ceph
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    cinder_group,
    cinder_volume,
    image_of,
)


@pytest.fixture(scope="module")
def volume_of_b(cloud: Cloud) -> Iterator[str]:
    """A Cinder volume of project B holding data, made by B's member through Cinder."""
    member = cloud["b-member"]
    with cinder_volume(member, ceph.unique_name("b-data")) as volume_id:
        with ceph.ioctx("ceph-a", "volumes") as io, \
                rbd.Image(io, image_of(volume_id)) as image:
            image.write(b"project B's own data" * 4096, 0)
        yield volume_id


def _rows(os_cairn: OpenStackCairn, volume_id: str) -> dict[str, int]:
    """What Cairn's database holds for a Cinder volume, in any project."""
    engine = sqlalchemy.create_engine(os_cairn.env["CAIRN_DATABASE_URL"])
    try:
        with Session(engine) as session:
            ids = list(session.scalars(select(Volume.id).where(
                Volume.cinder_volume_id == volume_id)))
            return {
                "volumes": len(ids),
                "jobs": session.scalar(select(func.count()).select_from(Job).where(or_(
                    Job.volume_id.in_(ids), Job.restore_cinder_volume_id == volume_id))) or 0,
                "restore_points": session.scalar(select(func.count()).select_from(
                    RestorePoint).where(RestorePoint.volume_id.in_(ids))) or 0,
                "plans": session.scalar(select(func.count()).select_from(Plan).where(
                    Plan.volumes.any(Volume.id.in_(ids)))) or 0,
            }
    finally:
        engine.dispose()


def _snapshots(volume_id: str) -> set[str]:
    with ceph.ioctx("ceph-a", "volumes") as io, \
            rbd.Image(io, image_of(volume_id), read_only=True) as image:
        return {snap["name"] for snap in image.list_snaps()}


def _same_as_missing(os_cairn: OpenStackCairn, token: str, method: str, path: str,
                     body: Any, real: str) -> None:
    """The request naming `real` is answered word for word as the one naming an id no
    volume or group has (spelled in the same case)."""
    missing = str(uuid.uuid4())
    if real.isupper():
        missing = missing.upper()
    got = os_cairn.call(method, path.replace("{id}", real), token,
                        json=_replace(body, "{id}", real))
    want = os_cairn.call(method, path.replace("{id}", missing), token,
                         json=_replace(body, "{id}", missing))
    assert want.status_code in (404, 422), want.text
    assert got.status_code == want.status_code, (method, path, got.text)
    assert got.json() == _replace(want.json(), missing, real), (got.text, want.text)


def _replace(value: object, old: str, new: str) -> object:
    if isinstance(value, str):
        return value.replace(old, new).replace(old.lower(), new.lower())
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    return value


def test_the_admin_of_project_a_cannot_touch_project_bs_volumes(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected,
        volume_of_b: str) -> None:
    admin_of_a = cloud["a-admin"]
    token = admin_of_a.token()
    # Cinder itself shows A's admin the volume (its default policy): Cairn must not follow.
    assert admin_of_a.cinder().get(volume_of_b).project_id == cloud["b-member"].project_id
    rows, snapshots = _rows(os_cairn, volume_of_b), _snapshots(volume_of_b)
    rules = [{"cron": "0 2 * * *"}]
    for method, path, body, spelled in (
            ("POST", "/v1/backups", {"volume": "{id}"}, volume_of_b),
            ("POST", "/v1/backups", {"volume": "{id}"}, volume_of_b.upper()),
            ("POST", "/v1/plans", {"name": ceph.unique_name("steal"), "volumes": ["{id}"],
                                   "rules": rules}, volume_of_b),
            ("PATCH", f"/v1/plans/{protected.plan_id}", {"volumes": ["{id}"]}, volume_of_b),
            ("POST", f"/v1/restore-points/{protected.restore_point_id}/restore",
             {"volume_id": "{id}"}, volume_of_b),
            ("GET", "/v1/volumes/{id}", None, volume_of_b),
            # Cinder resolves a list's marker for the token's roles: another project's
            # volume started a page (200) where a missing id was refused (422).
            ("GET", "/v1/volumes?marker={id}", None, volume_of_b),
            ("GET", "/v1/volumes?unprotected=true&marker={id}", None, volume_of_b)):
        _same_as_missing(os_cairn, token, method, path, body, spelled)
    listed = os_cairn.call("GET", "/v1/volumes", token, params={"limit": 1000}).json()
    assert volume_of_b not in {v["id"] for v in listed["volumes"]}

    # Nothing was registered, queued or made, in A's project or in B's; B's volume has no
    # new snapshot, and A's plan still protects its own volume only.
    assert _rows(os_cairn, volume_of_b) == rows
    assert _snapshots(volume_of_b) == snapshots
    plan = os_cairn.call("GET", f"/v1/plans/{protected.plan_id}", token).json()
    assert plan["volumes"] == [protected.volume_id]
    assert cloud["b-member"].cinder().get(volume_of_b).status == "available"


def test_the_admin_of_project_a_cannot_follow_project_bs_group(
        cloud: Cloud, os_cairn: OpenStackCairn, volume_of_b: str) -> None:
    with cinder_group(cloud["b-member"], ceph.unique_name("b-group"), [volume_of_b]) as group:
        assert cloud["a-admin"].cinder().session.request(  # Cinder shows it to A's admin
            f"/groups/{group}", "GET", endpoint_filter=cloud["a-admin"].cinder()
            .endpoint_filter, headers={"OpenStack-API-Version": "volume 3.25"},
            raise_exc=False).status_code == 200
        _same_as_missing(os_cairn, cloud["a-admin"].token(), "POST", "/v1/plans",
                         {"name": ceph.unique_name("steal-group"), "cinder_group": "{id}",
                          "rules": [{"cron": "0 2 * * *"}]}, group)
        assert _rows(os_cairn, volume_of_b)["plans"] == 0


def test_the_cloud_admin_still_backs_up_project_bs_volume_for_b(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected,
        volume_of_b: str) -> None:
    admin, member_b = cloud["n-admin"].token(), cloud["b-member"].token()
    rows = _rows(os_cairn, volume_of_b)
    seen = os_cairn.call("GET", f"/v1/volumes/{volume_of_b}", admin)
    assert seen.status_code == 200, seen.text
    made = os_cairn.call("POST", "/v1/backups", admin, json={"volume": volume_of_b})
    assert made.status_code == 202, made.text
    job = os_cairn.wait_job(made.json()["id"], member_b)  # B's job, B sees it
    assert job["status"] == "succeeded", job
    assert job["project_id"] == cloud["b-member"].project_id
    try:
        # Restoring project A's restore point over B's volume would move A's data into B:
        # refused even for the cloud's administrator, before anything is queued.
        over = os_cairn.call("POST", f"/v1/restore-points/{protected.restore_point_id}/"
                             "restore", admin, json={"volume_id": volume_of_b})
        assert over.status_code == 403, over.text
        assert over.json()["error"]["code"] == "volume_not_owned"
        assert _rows(os_cairn, volume_of_b)["jobs"] == rows["jobs"] + 1
    finally:
        deleted = os_cairn.call("DELETE", f"/v1/restore-points/{job['restore_point_id']}",
                                member_b)
        assert deleted.status_code == 202, deleted.text
        assert os_cairn.wait_job(deleted.json()["id"], member_b)["status"] == "succeeded"


def test_one_volume_in_a_thousand_spellings_costs_cinder_nothing(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected) -> None:
    volume = protected.volume_id
    letters = [n for n, c in enumerate(volume) if c in "abcdef"]
    spellings = ["".join(c.upper() if n in letters and (i >> letters.index(n)) & 1 else c
                         for n, c in enumerate(volume))
                 for i in range(min(1000, 2 ** len(letters)))]
    assert len(set(spellings)) == len(spellings) >= 64
    started = time.monotonic()
    refused = os_cairn.call("POST", "/v1/plans", cloud["a-member"].token(), json={
        "name": ceph.unique_name("spellings"), "volumes": spellings,
        "rules": [{"cron": "0 2 * * *"}]})
    # Before, each spelling was one call to Cinder (tens of seconds for a thousand) and the
    # plan was made; the bound leaves room for a loaded machine.
    assert time.monotonic() - started < 10.0
    assert refused.status_code == 422, refused.text
    assert "listed more than once" in refused.json()["error"]["message"]
