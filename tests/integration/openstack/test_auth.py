"""Keystone auth and policy on the real Keystone: 401 without a valid token, 403 for a role
that may not, 404 for another project's objects."""

from __future__ import annotations

import time

import httpx
import pytest

from services.auth.keystone import TokenInfo, TokenValidator
from services.errors import ServiceUnavailable, Unauthorized
from services.openstack.sessions import service_session
from services.settings import KeystoneSettings
from tests.integration.openstack.conftest import Protected
from tests.support import ceph
from tests.support.openstack import KEYSTONE, SERVICE_PASSWORD, Cloud, OpenStackCairn


def test_missing_or_invalid_token_is_401(os_cairn: OpenStackCairn) -> None:
    for token in (None, "not-a-token", "gAAAAABnot-a-fernet-token-at-all"):
        response = os_cairn.call("GET", "/v1/plans", token)
        assert response.status_code == 401, response.text
        assert "token" in response.json()["error"]["message"]


def test_revoked_token_is_401_once_the_cache_lapses(cloud: Cloud,
                                                    os_cairn: OpenStackCairn) -> None:
    token = cloud["a-reader"].token()
    assert os_cairn.call("GET", "/v1/plans", token).status_code == 200
    revoked = httpx.delete(f"{KEYSTONE}/auth/tokens",
                           headers={"X-Auth-Token": token, "X-Subject-Token": token})
    assert revoked.status_code == 204
    time.sleep(1.2)  # CAIRN_TOKEN_CACHE_SECONDS is 1 for the tests
    assert os_cairn.call("GET", "/v1/plans", token).status_code == 401


def test_expired_token_is_refused_even_when_keystone_still_knows_it(cloud: Cloud) -> None:
    # Keystone's tokens live an hour; move the validator's clock past that.
    settings = KeystoneSettings(auth_url=KEYSTONE, username="cairn",
                                password=SERVICE_PASSWORD)
    later = TokenValidator(service_session(settings), cache_seconds=60,
                           now=lambda: time.time() + 2 * 3600)
    with pytest.raises(Unauthorized, match="expired"):
        later.validate(cloud["a-reader"].token())
    now = TokenValidator(service_session(settings), cache_seconds=60)
    info = now.validate(cloud["a-reader"].token())
    assert info.project_id == cloud["a-reader"].project_id
    assert "reader" in info.roles


def test_other_project_sees_nothing_of_a(cloud: Cloud, os_cairn: OpenStackCairn,
                                         protected: Protected) -> None:
    token = cloud["b-member"].token()
    reads = [f"/v1/plans/{protected.plan_id}", f"/v1/restore-points/{protected.restore_point_id}",
             f"/v1/jobs/{protected.job_id}", f"/v1/plans/{protected.plan_id}/next-runs"]
    for path in reads:
        assert os_cairn.call("GET", path, token).status_code == 404, path
    for path, listing in (("/v1/plans", "plans"), ("/v1/restore-points", "restore_points"),
                          ("/v1/jobs", "jobs"), ("/v1/volumes", "volumes")):
        response = os_cairn.call("GET", path, token)
        assert response.status_code == 200, response.text
        ids = {item["id"] for item in response.json()[listing]}
        assert not ids & {protected.plan_id, protected.restore_point_id, protected.job_id,
                          protected.volume_id}, path
    attempts = [
        ("POST", "/v1/backups", {"volume": protected.volume_id}),
        ("POST", "/v1/plans", {"name": "steal", "volumes": [protected.volume_id],
                               "rules": [{"cron": "0 2 * * *"}]}),
        ("POST", f"/v1/restore-points/{protected.restore_point_id}/restore",
         {"new_volume": {"name": "stolen"}}),
        ("DELETE", f"/v1/restore-points/{protected.restore_point_id}", None),
        ("POST", f"/v1/restore-points/{protected.restore_point_id}/verify", {}),
        ("POST", f"/v1/plans/{protected.plan_id}/run", {}),
        ("DELETE", f"/v1/plans/{protected.plan_id}", None),
        ("POST", f"/v1/jobs/{protected.job_id}/cancel", None),
    ]
    for method, path, body in attempts:
        response = os_cairn.call(method, path, token, json=body)
        assert response.status_code == 404, (method, path, response.text)
    # Naming A's volume by its RBD image instead is refused too.
    by_image = os_cairn.call("POST", "/v1/backups", token,
                             json={"volume": f"ceph-a/volumes/volume-{protected.volume_id}"})
    assert by_image.status_code == 403, by_image.text
    # And A's plan and restore point are still there.
    a = cloud["a-member"].token()
    assert os_cairn.call("GET", f"/v1/plans/{protected.plan_id}", a).status_code == 200


def test_reader_lists_but_cannot_change(cloud: Cloud, os_cairn: OpenStackCairn,
                                        protected: Protected) -> None:
    token = cloud["a-reader"].token()
    for path in ("/v1/plans", "/v1/volumes", "/v1/restore-points", "/v1/jobs", "/v1/targets",
                 f"/v1/plans/{protected.plan_id}",
                 f"/v1/restore-points/{protected.restore_point_id}"):
        assert os_cairn.call("GET", path, token).status_code == 200, path
    changes = [
        ("POST", "/v1/plans", {"name": ceph.unique_name("r"), "volumes": [protected.volume_id],
                               "rules": [{"cron": "0 2 * * *"}]}),
        ("POST", f"/v1/plans/{protected.plan_id}/run", {}),
        ("POST", f"/v1/plans/{protected.plan_id}/pause", None),
        ("DELETE", f"/v1/plans/{protected.plan_id}", None),
        ("POST", "/v1/backups", {"volume": protected.volume_id}),
        ("POST", f"/v1/restore-points/{protected.restore_point_id}/restore",
         {"new_volume": {"name": "x"}}),
        ("DELETE", f"/v1/restore-points/{protected.restore_point_id}", None),
    ]
    for method, path, body in changes:
        response = os_cairn.call(method, path, token, json=body)
        assert response.status_code == 403, (method, path, response.text)
        assert "may not" in response.json()["error"]["message"]


def test_quotas_are_for_the_cloud_admin(cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    project_b = cloud["b-member"].project_id
    for user in ("a-member", "a-admin", "b-admin"):
        # A project's own admin is not the cloud's: before, admin anywhere was admin
        # everywhere, and project A's admin could set project B's quota.
        refused = os_cairn.call("PUT", f"/v1/quotas/{project_b}", cloud[user].token(),
                                json={"restore_points": 50})
        assert refused.status_code == 403, (user, refused.text)
    admin = os_cairn.call("PUT", f"/v1/quotas/{project_b}", cloud["n-admin"].token(),
                          json={"restore_points": 50})
    assert admin.status_code == 200, admin.text
    usage = os_cairn.call("GET", "/v1/usage", cloud["b-member"].token()).json()
    assert usage["limits"]["restore_points"] == 50


def test_only_the_cloud_admin_sees_every_project(cloud: Cloud, os_cairn: OpenStackCairn,
                                                 protected: Protected) -> None:
    token = cloud["n-admin"].token()
    assert os_cairn.call("GET", f"/v1/plans/{protected.plan_id}", token).status_code == 200
    listed = os_cairn.call("GET", "/v1/restore-points", token).json()["restore_points"]
    assert protected.restore_point_id in {rp["id"] for rp in listed}
    token = cloud["b-admin"].token()  # project B's own administrator: project B only
    assert os_cairn.call("GET", f"/v1/plans/{protected.plan_id}", token).status_code == 404
    listed = os_cairn.call("GET", "/v1/restore-points", token).json()["restore_points"]
    assert protected.restore_point_id not in {rp["id"] for rp in listed}


def test_the_cloud_admin_works_on_a_project_without_taking_its_objects(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected) -> None:
    admin, member = cloud["n-admin"].token(), cloud["a-member"].token()
    project_a = cloud["a-member"].project_id
    # Before, the admin's PATCH re-registered the plan's volumes under the admin's project.
    changed = os_cairn.call("PATCH", f"/v1/plans/{protected.plan_id}", admin,
                            json={"volumes": [protected.volume_id]})
    assert changed.status_code == 200, changed.text
    seen = os_cairn.call("GET", f"/v1/plans/{protected.plan_id}", member).json()
    assert seen["volumes"] == [protected.volume_id]
    volumes = {v["id"]: v for v in os_cairn.call("GET", "/v1/volumes", member).json()["volumes"]}
    assert [p["id"] for p in volumes[protected.volume_id]["plans"]] == [protected.plan_id]
    # A backup the admin starts belongs to the volume's project.
    job = os_cairn.call("POST", "/v1/backups", admin, json={"volume": protected.volume_id})
    assert job.status_code == 202, job.text
    done = os_cairn.wait_job(job.json()["id"], member)  # project A sees its job
    assert done["status"] == "succeeded", done
    rp = os_cairn.call("GET", f"/v1/restore-points/{done['restore_point_id']}", member)
    assert rp.status_code == 200, rp.text
    usage = os_cairn.call("GET", f"/v1/quotas/{project_a}", admin).json()
    assert usage["usage"]["restore_points"] >= 2
    os_cairn.call("DELETE", f"/v1/restore-points/{done['restore_point_id']}", member)


def test_keystone_unreachable_is_503_not_a_pass() -> None:
    settings = KeystoneSettings(auth_url="http://127.0.0.1:9/v3", username="cairn",
                                password=SERVICE_PASSWORD)
    validator = TokenValidator(service_session(settings), cache_seconds=60)
    with pytest.raises(ServiceUnavailable, match="Keystone could not be reached"):
        validator.validate("any-token")


class _CountingValidator(TokenValidator):
    """The real validator against the real Keystone, counting the calls it makes there."""

    asked = 0

    def _ask_keystone(self, token: str) -> TokenInfo:
        self.asked += 1
        return super()._ask_keystone(token)


def test_a_refused_token_costs_one_keystone_call_per_cache_time(cloud: Cloud) -> None:
    settings = KeystoneSettings(auth_url=KEYSTONE, username="cairn",
                                password=SERVICE_PASSWORD)
    validator = _CountingValidator(service_session(settings), cache_seconds=60)
    for _ in range(20):
        with pytest.raises(Unauthorized):
            validator.validate("gAAAAABgarbage-token-sent-again-and-again")
    # Before, each request with it asked Keystone (and held an API thread meanwhile).
    assert validator.asked == 1
    # A good token is still asked about, once.
    token = cloud["a-reader"].token()
    for _ in range(3):
        validator.validate(token)
    assert validator.asked == 2
