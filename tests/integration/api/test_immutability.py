"""Immutability that holds: a member may lock a restore point or extend its lock, only an
administrator may shorten or remove a lock in force; a locked restore point refuses deletion
with the date, and a prune keeps it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup, restore_point
from tests.support.stack import CLOUD_ADMIN, HEADERS, Stack

pytestmark = pytest.mark.ceph

ADMIN = CLOUD_ADMIN


def _at(days: float) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).isoformat()


def _lock(stack: Stack, rp_id: str, until: str | None, headers: dict[str, str] = HEADERS
          ) -> object:
    return stack.client.patch(f"/v1/restore-points/{rp_id}", headers=headers,
                              json={"locked_until": until})


def test_members_extend_locks_and_only_admins_shorten_them(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    name = ceph.unique_name("locked")
    images.append(name)
    ceph.make_mixed_image(volumes_pool, name, size=16 * MiB + 7)
    rp_id = backup(stack, name)["restore_point_id"]

    assert _lock(stack, rp_id, _at(1)).status_code == 200
    assert _lock(stack, rp_id, _at(2)).status_code == 200          # extend
    # Nor may the project's own admin: a lock holds against whoever runs the project
    # (ransomware with the tenant's admin token); only the cloud's administrator shortens.
    project_admin = {**HEADERS, "X-Roles": "admin,member,reader"}
    for shorter in (_at(1), None):
        for headers in (HEADERS, project_admin):
            refused = _lock(stack, rp_id, shorter, headers)
            assert refused.status_code == 403, refused.text
            assert "only an administrator" in refused.json()["error"]["message"]
    locked_until = restore_point(stack, rp_id)["locked_until"]

    deleted = stack.delete(f"/v1/restore-points/{rp_id}")
    assert deleted.status_code == 409, deleted.text
    assert locked_until[:19] in deleted.json()["error"]["message"]
    assert restore_point(stack, rp_id)["status"] == "available"

    assert _lock(stack, rp_id, _at(0.5), ADMIN).status_code == 200  # shorten
    assert _lock(stack, rp_id, None, ADMIN).status_code == 200      # remove
    deleted = stack.delete(f"/v1/restore-points/{rp_id}")
    assert deleted.status_code == 202, deleted.text
    assert stack.wait_job(deleted.json()["id"])["status"] == "succeeded"


def test_an_expired_lock_can_be_replaced_by_a_member(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    name = ceph.unique_name("expired")
    images.append(name)
    ceph.make_mixed_image(volumes_pool, name, size=16 * MiB)
    rp_id = backup(stack, name)["restore_point_id"]
    assert _lock(stack, rp_id, _at(-1)).status_code == 200   # already past: no lock in force
    assert _lock(stack, rp_id, None).status_code == 200


def test_prune_keeps_a_locked_restore_point(stack: Stack, volumes_pool: rados.Ioctx,
                                            images: list[str]) -> None:
    name = ceph.unique_name("keeplocked")
    images.append(name)
    ceph.make_mixed_image(volumes_pool, name, size=16 * MiB + 1)
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("lockplan"), "volumes": [f"ceph-a/volumes/{name}"],
        "rules": [{"cron": "0 3 * * *"}], "retention": {"keep_last": 1}}).json()
    first = stack.post(f"/v1/plans/{plan['id']}/run", {}).json()["jobs"][0]
    first = stack.wait_job(first["id"])
    assert _lock(stack, first["restore_point_id"], _at(3)).status_code == 200
    second = stack.wait_job(stack.post(f"/v1/plans/{plan['id']}/run", {}).json()["jobs"][0]["id"])
    assert second["status"] == "succeeded"
    deadline = time.monotonic() + 30
    while True:   # the prune that follows the second backup has run
        prunes = stack.get("/v1/jobs", plan_id=plan["id"], kind="prune").json()["jobs"]
        if prunes and all(p["status"] == "succeeded" for p in prunes):
            break
        assert time.monotonic() < deadline, prunes
        time.sleep(0.2)
    assert restore_point(stack, first["restore_point_id"])["status"] == "available"
    _lock(stack, first["restore_point_id"], None, ADMIN)
    stack.delete(f"/v1/plans/{plan['id']}")
