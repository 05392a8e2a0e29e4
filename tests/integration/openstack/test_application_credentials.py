"""Keystone application credentials on the real Keystone: one with access rules reaches only
the requests its rules list on Cairn's service type (as keystonemiddleware enforces them for
other services), and no further into Cinder through Cairn than its rules reach Cinder; one
without rules acts as its user."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from services.auth.access_rules import SERVICE_TYPE
from tests.integration.openstack.conftest import Protected
from tests.support.openstack import KEYSTONE, Cloud, OpenStackCairn, User, delete_volume


class Credentials:
    """Application credentials a user makes for themselves, deleted afterwards."""

    def __init__(self, user: User) -> None:
        self.user = user
        self.token = user.token()
        self.user_id = httpx.get(f"{KEYSTONE}/auth/tokens", headers={
            "X-Auth-Token": self.token, "X-Subject-Token": self.token}
        ).json()["token"]["user"]["id"]
        self.made: list[str] = []

    def token_of(self, access_rules: list[dict[str, str]] | None) -> str:
        # The member's own role, named: without `roles` Keystone copies every role of the
        # token, and refused the credential once in a parallel run for a role the token
        # listed and the user did not hold.
        body: dict[str, Any] = {"name": f"cairn-test-{uuid.uuid4().hex[:8]}",
                                "roles": [{"name": "member"}]}
        if access_rules is not None:
            body["access_rules"] = access_rules
        made = httpx.post(f"{KEYSTONE}/users/{self.user_id}/application_credentials",
                          headers={"X-Auth-Token": self.token},
                          json={"application_credential": body})
        assert made.status_code == 201, made.text
        credential = made.json()["application_credential"]
        self.made.append(credential["id"])
        issued = httpx.post(f"{KEYSTONE}/auth/tokens", json={"auth": {"identity": {
            "methods": ["application_credential"], "application_credential": {
                "id": credential["id"], "secret": credential["secret"]}}}})
        assert issued.status_code == 201, issued.text
        return issued.headers["X-Subject-Token"]

    def delete_all(self) -> None:
        for credential_id in self.made:
            httpx.delete(f"{KEYSTONE}/users/{self.user_id}/application_credentials/"
                         f"{credential_id}", headers={"X-Auth-Token": self.token})


@pytest.fixture
def credentials(cloud: Cloud) -> Iterator[Credentials]:
    made = Credentials(cloud["a-member"])
    yield made
    made.delete_all()


def test_access_rules_allow_only_what_they_list(os_cairn: OpenStackCairn,
                                                protected: Protected,
                                                credentials: Credentials) -> None:
    token = credentials.token_of([{"service": SERVICE_TYPE, "method": "GET",
                                   "path": "/v1/restore-points"}])
    listed = os_cairn.call("GET", "/v1/restore-points", token)
    assert listed.status_code == 200, listed.text
    assert protected.restore_point_id in {rp["id"] for rp in listed.json()["restore_points"]}
    for method, path, body in (
            ("POST", "/v1/backups", {"volume": protected.volume_id}),
            ("GET", "/v1/plans", None),
            ("GET", f"/v1/restore-points/{protected.restore_point_id}", None),
            ("DELETE", f"/v1/restore-points/{protected.restore_point_id}", None)):
        refused = os_cairn.call(method, path, token, json=body)
        assert refused.status_code == 403, (method, path, refused.text)
        message = refused.json()["error"]["message"]
        assert f"access rules do not allow {method} {path} on {SERVICE_TYPE}" in message
        assert f"it allows GET /v1/restore-points on {SERVICE_TYPE}" in message


def test_rules_for_other_services_allow_nothing_here(os_cairn: OpenStackCairn,
                                                     credentials: Credentials) -> None:
    token = credentials.token_of([{"service": "volumev3", "method": "GET", "path": "/v3/**"}])
    refused = os_cairn.call("GET", "/v1/restore-points", token)
    assert refused.status_code == 403, refused.text
    assert f"it lists nothing on {SERVICE_TYPE}" in refused.json()["error"]["message"]


def test_a_credential_without_rules_acts_as_its_user(os_cairn: OpenStackCairn,
                                                     protected: Protected,
                                                     credentials: Credentials) -> None:
    token = credentials.token_of(None)
    for path in ("/v1/plans", "/v1/restore-points",
                 f"/v1/restore-points/{protected.restore_point_id}"):
        answer = os_cairn.call("GET", path, token)
        assert answer.status_code == 200, (path, answer.text)
    refused = os_cairn.call("GET", "/v1/orphans", token)
    assert refused.status_code == 403, refused.text  # a member, as its user


def test_a_credential_that_cannot_reach_cinder_makes_no_volume_through_cairn(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected,
        credentials: Credentials) -> None:
    """Rules that allow Cairn's restore and nothing in Cinder: a restore into a new volume
    is refused in both modes, before anything is made. A copy creates the volume with the
    caller's token, which Cinder refuses; an instant restore (made by Cairn's service user)
    asks Cinder for the volume's type with the caller's token first. Before, the instant
    one was accepted: the credential had Cinder volumes made that it could not make."""
    token = credentials.token_of([{"service": SERVICE_TYPE, "method": "POST",
                                   "path": "/v1/restore-points/*/restore"}])
    name = f"cairn-test-{uuid.uuid4().hex[:8]}"
    accepted: list[str] = []
    try:
        for mode in ("instant", "copy"):
            refused = os_cairn.call(
                "POST", f"/v1/restore-points/{protected.restore_point_id}/restore", token,
                json={"new_volume": {"name": name}, "mode": mode})
            if refused.status_code == 202:
                accepted.append(refused.json()["id"])
            assert refused.status_code == 403, (mode, refused.text)
            assert "application credential" in refused.json()["error"]["message"], mode
        assert name not in {v.name for v in cloud["a-member"].cinder().list_volumes()}
    finally:
        for job_id in accepted:  # what the old code made
            job = os_cairn.wait_job(job_id, cloud["a-member"].token())
            if job["restore_volume_id"]:
                delete_volume(cloud["a-member"], job["restore_volume_id"])
