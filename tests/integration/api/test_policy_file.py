"""An operator's policy file in oslo.policy's idiom, on the real app: `project_id:%(project_id)s`
holds for the caller's own project only. Before, a file using it stopped cairn-api at start
(the parser split `%(project_id)s` at its parentheses), and the check, had it parsed, was
always true: every caller would have read and set every project's quota. A file whose rules
reach beyond a project (an old `"admin": "role:admin"`) is named in the log at start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from tests.support.stack import CLOUD_ADMIN, HEADERS, PROJECT, Stack

# The policy does not depend on the database.
pytestmark = pytest.mark.production_database_only


def test_project_id_in_a_policy_file_means_the_callers_own_project(stack: Stack,
                                                                   tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text('"quota:get": "rule:admin or project_id:%(project_id)s"\n'
                      '"quota:update": "rule:admin or (role:admin and '
                      'project_id:%(project_id)s)"\n')
    settings = stack.settings.model_copy(update={"policy_file": policy})
    with TestClient(create_app(settings)) as api:
        own = api.get(f"/v1/quotas/{PROJECT}", headers=HEADERS)
        assert own.status_code == 200, own.text
        assert own.json()["project_id"] == PROJECT
        other = api.get("/v1/quotas/project-b", headers=HEADERS)
        assert other.status_code == 403, other.text
        assert "may not read quotas" in other.json()["error"]["message"]
        project_admin = {**HEADERS, "X-Roles": "admin"}
        refused = api.put("/v1/quotas/project-b", headers=project_admin,
                          json={"restore_points": 1})
        assert refused.status_code == 403, refused.text
        assert api.get("/v1/quotas/project-b", headers=CLOUD_ADMIN).status_code == 200
        session = TestClient(api.app).post("/v1/session", json={"project_id": PROJECT})
        assert "quota:get" in session.json()["allowed"]  # its own, as the portal asks


def test_an_old_policy_file_that_makes_any_admin_the_cloud_admin_is_named_at_start(
        stack: Stack, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Cinder's old policies say `"admin": "role:admin"`: the admin of any project would set
    every project's quota and list the cloud's orphans. Cairn starts (the operator chose
    it), and says so in its log at every start, naming the rules."""
    policy = tmp_path / "policy.yaml"
    policy.write_text('"admin": "role:admin"\n')
    settings = stack.settings.model_copy(update={"policy_file": policy})
    with caplog.at_level(logging.WARNING, logger="api.main"), \
            TestClient(create_app(settings)) as api:
        warnings = [r.getMessage() for r in caplog.records if r.name == "api.main"]
        assert len(warnings) == 1, warnings
        # Every rule that is the cloud admin's, the Cinder backup driver's restores too.
        assert f"policy file {policy}: admin, orphan:list, quota:get, quota:update, " \
               "restore_point:restore_for_cinder_backup let a role that any project's " \
               "users may hold act beyond their own project" in warnings[0]
        assert '"admin": "is_admin:True"' in warnings[0]
        # As the warning says: a project's admin now sets another project's quota.
        project_admin = {**HEADERS, "X-Roles": "admin"}
        assert api.put("/v1/quotas/project-b", headers=project_admin,
                       json={"restore_points": 1}).status_code == 200
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="api.main"), \
            TestClient(create_app(stack.settings)):
        assert not [r for r in caplog.records if r.name == "api.main"]
