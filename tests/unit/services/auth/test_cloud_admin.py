"""Who is the cloud's administrator: the admin role in a project whose id `admin_projects`
holds, for Keystone's tokens and noauth's headers alike; never by a project's name."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.auth.access_rules import SERVICE_TYPE, AccessRule
from services.auth.keystone import TokenInfo
from services.auth.portal_sessions import noauth_context
from services.errors import Forbidden

ADMIN_ID = "0123456789abcdef0123456789abcdef"
IMPOSTOR_ID = "fedcba9876543210fedcba9876543210"


def info(project_id: str, *roles: str, rules: tuple[AccessRule, ...] | None = None
         ) -> TokenInfo:
    return TokenInfo(user_id="u", project_id=project_id, roles=frozenset(roles),
                     expires_at=datetime(2030, 1, 1, tzinfo=UTC), endpoints={},
                     access_rules=rules)


def test_keystone_cloud_admin_by_project_id_only() -> None:
    admins = frozenset({ADMIN_ID})
    assert info(ADMIN_ID, "admin").context("t", "GET", "/v1/plans", admins).is_admin
    assert not info(ADMIN_ID, "member").context("t", "GET", "/v1/plans", admins).is_admin
    # Another domain's project called like the admin project has another id.
    assert not info(IMPOSTOR_ID, "admin").context("t", "GET", "/v1/plans", admins).is_admin
    assert not info(ADMIN_ID, "admin").context("t", "GET", "/v1/plans").is_admin


def test_a_token_s_access_rules_are_checked_on_every_request() -> None:
    limited = info(ADMIN_ID, "admin",
                   rules=(AccessRule(SERVICE_TYPE, "GET", "/v1/restore-points"),))
    assert limited.context("t", "GET", "/v1/restore-points").project_id == ADMIN_ID
    with pytest.raises(Forbidden, match="access rules do not allow POST /v1/backups"):
        limited.context("t", "POST", "/v1/backups", frozenset({ADMIN_ID}))


@pytest.mark.parametrize(("project", "roles", "cloud_admin"), [
    ("cloud-admin", {"admin"}, True),
    ("cloud-admin", {"member", "reader"}, False),
    ("project-a", {"admin"}, False),   # before, any X-Roles: admin was the cloud's
    ("admin", {"admin"}, False),
])
def test_noauth_follows_the_same_rule(project: str, roles: set[str], cloud_admin: bool) -> None:
    ctx = noauth_context(project, frozenset(roles), frozenset({"cloud-admin"}))
    assert ctx.is_admin is cloud_admin
    assert ctx.project_id == project
