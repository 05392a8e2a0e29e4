"""The cloud's administrator is the admin role in the project CAIRN_ADMIN_PROJECTS names by
id, on the real Keystone. A domain's administrator who makes, in their own domain, a project
called like Cairn's admin project (or `admin`) and takes the admin role there is that
project's administrator and no more: another project's restore points are 404 to them,
orphans and quotas refused, in the API and in the portal's session alike. What the real
cloud administrator restores of a project's restore point stays that project's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.integration.openstack.conftest import Protected
from tests.support.openstack import (
    ADMIN_PROJECT,
    KEYSTONE,
    PASSWORD,
    Cloud,
    OpenStackCairn,
    admin,
    delete_volume,
)


@dataclass(frozen=True)
class Impostor:
    domain: str
    user: str
    projects: dict[str, str]
    """Project name → id, in the impostor's own domain."""

    def token(self, project_id: str) -> str:
        return _token(self.user, self.domain, {"project": {"id": project_id}})


def _token(user: str, domain: str, scope: dict[str, object]) -> str:
    answer = httpx.post(f"{KEYSTONE}/auth/tokens", json={"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"name": domain}, "password": PASSWORD}}},
        "scope": scope}})
    assert answer.status_code == 201, answer.text
    return answer.headers["X-Subject-Token"]


def _keystone(method: str, path: str, token: str, body: object = None) -> httpx.Response:
    answer = httpx.request(method, f"{KEYSTONE}{path}", json=body,
                           headers={"X-Auth-Token": token})
    assert answer.status_code < 300, f"{method} {path}: {answer.status_code} {answer.text}"
    return answer


@pytest.fixture
def impostor() -> Iterator[Impostor]:
    """A second domain with its own administrator, who makes (with a domain-scoped token
    of their own) the projects `cairn-test-admin` and `admin` there and takes the admin
    role in both."""
    ident = admin()
    cloud_token = ident.session.get_token()
    name = f"cairn-test-{uuid.uuid4().hex[:8]}"
    domain_id = _keystone("POST", "/domains", cloud_token,
                          {"domain": {"name": name, "enabled": True}}).json()["domain"]["id"]
    try:
        user_id = ident.ensure_user(f"{name}-admin", PASSWORD, domain_id=domain_id)
        role_id = ident.ensure_role("admin")
        _keystone("PUT", f"/domains/{domain_id}/users/{user_id}/roles/{role_id}", cloud_token)
        own = _token(f"{name}-admin", name, {"domain": {"id": domain_id}})
        projects = {}
        for project in (ADMIN_PROJECT, "admin"):
            made = _keystone("POST", "/projects", own, {"project": {
                "name": project, "domain_id": domain_id, "enabled": True}})
            projects[project] = made.json()["project"]["id"]
            _keystone("PUT", f"/projects/{projects[project]}/users/{user_id}/roles/{role_id}",
                      own)
        yield Impostor(name, f"{name}-admin", projects)
    finally:
        for found in _keystone("GET", f"/projects?domain_id={domain_id}",
                               cloud_token).json()["projects"]:
            _keystone("DELETE", f"/projects/{found['id']}", cloud_token)
        for found in _keystone("GET", f"/users?domain_id={domain_id}",
                               cloud_token).json()["users"]:
            _keystone("DELETE", f"/users/{found['id']}", cloud_token)
        _keystone("PATCH", f"/domains/{domain_id}", cloud_token,
                  {"domain": {"enabled": False}})
        _keystone("DELETE", f"/domains/{domain_id}", cloud_token)


def _portal_session(cairn: OpenStackCairn, domain: str, user: str, project_id: str
                    ) -> dict[str, object]:
    with httpx.Client(base_url=cairn.url, timeout=60) as browser:
        signed = browser.post("/v1/session", json={"domain": domain, "username": user,
                                                   "password": PASSWORD,
                                                   "project_id": project_id})
        assert signed.status_code == 200, signed.text
        body: dict[str, object] = signed.json()
        browser.delete("/v1/session", headers={"X-CSRF-Token": str(body["csrf_token"])})
        return body


def test_a_project_named_like_the_admin_project_in_another_domain_is_not_the_cloud_admin(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected,
        impostor: Impostor) -> None:
    project_b = cloud["b-member"].project_id
    for name, project_id in impostor.projects.items():
        token = impostor.token(project_id)
        seen = os_cairn.call("GET", f"/v1/restore-points/{protected.restore_point_id}", token)
        assert seen.status_code == 404, (name, seen.text)
        listed = os_cairn.call("GET", "/v1/restore-points", token)
        assert listed.status_code == 200, listed.text
        assert protected.restore_point_id not in {
            rp["id"] for rp in listed.json()["restore_points"]}, name
        for method, path, body in (("GET", "/v1/orphans", None),
                                   ("GET", f"/v1/quotas/{project_b}", None),
                                   ("PUT", f"/v1/quotas/{project_b}", {"restore_points": 1})):
            refused = os_cairn.call(method, path, token, json=body)
            assert refused.status_code == 403, (name, method, path, refused.text)
        deleted = os_cairn.call("DELETE", f"/v1/restore-points/{protected.restore_point_id}",
                                token)
        assert deleted.status_code == 404, (name, deleted.text)
        session = _portal_session(os_cairn, impostor.domain, impostor.user, project_id)
        assert session["cloud_admin"] is False, (name, session)
        assert "quota:update" not in session["allowed"], (name, session)

    # The admin of the project whose id CAIRN_ADMIN_PROJECTS holds still is.
    token = cloud["n-admin"].token()
    seen = os_cairn.call("GET", f"/v1/restore-points/{protected.restore_point_id}", token)
    assert seen.status_code == 200, seen.text
    assert os_cairn.call("GET", f"/v1/quotas/{project_b}", token).status_code == 200
    orphans = os_cairn.call("GET", "/v1/orphans", token)
    assert orphans.status_code == 200, orphans.text
    session = _portal_session(os_cairn, "Default", "n-admin", cloud["n-admin"].project_id)
    assert session["cloud_admin"] is True, session


def test_the_cloud_admins_restore_into_a_new_volume_lands_in_the_restore_points_project(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected) -> None:
    """The cloud's administrator restores project A's restore point into a new Cinder
    volume: the volume is A's, as the job and the restore point are, whatever the mode.
    Before, a copy made it in the administrator's own project (an instant restore adopted
    it in A's): A's data in another project, which A's members could not see."""
    member = cloud["a-member"]
    admin_token = cloud["n-admin"].token()
    made = os_cairn.call("POST", f"/v1/restore-points/{protected.restore_point_id}/restore",
                         admin_token, json={"new_volume": {"name": "restored-by-the-admin"}})
    assert made.status_code == 202, made.text
    job = os_cairn.wait_job(made.json()["id"], admin_token)
    volume_id = job["restore_volume_id"]
    assert volume_id, job
    try:
        assert job["status"] == "succeeded", job
        assert job["project_id"] == member.project_id
        seen = member.cinder().get(volume_id)  # A's own token finds it: it is A's
        assert (seen.name, seen.status) == ("restored-by-the-admin", "available")
        assert cloud["n-admin"].cinder().get(volume_id).project_id == member.project_id
    finally:
        delete_volume(cloud["n-admin"], volume_id)
