"""An operator's policy file in oslo.policy's idiom, on the real app: `project_id:%(project_id)s`
holds for the caller's own project only. Before, a file using it stopped cairn-api at start
(the parser split `%(project_id)s` at its parentheses), and the check, had it parsed, was
always true: every caller would have read and set every project's quota."""

from __future__ import annotations

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
