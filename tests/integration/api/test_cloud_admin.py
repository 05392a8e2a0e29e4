"""Under noauth as under Keystone, the cloud's administrator is the admin role in a project of
CAIRN_ADMIN_PROJECTS (the stacks' `cloud-admin`); `X-Roles: admin` in any other project
administers that project only. Before, whoever sent `X-Roles: admin` was the cloud's
administrator: every project's objects, quotas and orphans."""

from __future__ import annotations

import pytest
import rados
import rbd
from fastapi.testclient import TestClient

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import ADMIN_PROJECT, CLOUD_ADMIN, HEADERS, Stack

# Who is the administrator does not depend on the database.
pytestmark = [pytest.mark.ceph, pytest.mark.production_database_only]


def test_the_admin_role_elsewhere_is_not_the_cloud_admin(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    volume = ceph.unique_name("admins")
    images.append(volume)
    rbd.RBD().create(volumes_pool, volume, MiB)
    made = stack.post("/v1/plans", {"name": volume, "volumes": [f"ceph-a/volumes/{volume}"],
                                    "rules": [{"cron": "0 2 * * *"}]})
    assert made.status_code == 201, made.text
    plan = made.json()["id"]
    try:
        for project in ("project-b", "admin", "cloud-admin-not"):
            admin = {"X-Project-Id": project, "X-Roles": "admin,member,reader"}
            assert stack.get(f"/v1/plans/{plan}", admin).status_code == 404, project
            for method, path, body in (("GET", "/v1/orphans", None),
                                       ("GET", "/v1/quotas/project-a", None),
                                       ("PUT", "/v1/quotas/project-a", {"restore_points": 1})):
                refused = stack.client.request(method, path, headers=admin, json=body)
                assert refused.status_code == 403, (project, path, refused.text)
            session = TestClient(stack.client.app).post(
                "/v1/session", json={"project_id": project, "roles": ["admin"]})
            assert session.json()["cloud_admin"] is False, (project, session.text)
        # Project A's own admin administers project A, not the cloud.
        own = {**HEADERS, "X-Roles": "admin"}
        assert stack.get(f"/v1/plans/{plan}", own).status_code == 200
        assert stack.get("/v1/quotas/project-a", own).status_code == 403

        assert stack.get(f"/v1/plans/{plan}", CLOUD_ADMIN).status_code == 200
        assert stack.get("/v1/quotas/project-a", CLOUD_ADMIN).status_code == 200
        session = TestClient(stack.client.app).post(
            "/v1/session", json={"project_id": ADMIN_PROJECT, "roles": ["admin"]})
        assert session.json()["cloud_admin"] is True, session.text
    finally:
        stack.delete(f"/v1/plans/{plan}")
