"""Application credentials' access rules, as keystonemiddleware reads them: a rule allows one
method on one path template of one service; anything else is refused with what it allows."""

from __future__ import annotations

import pytest

from services.auth.access_rules import SERVICE_TYPE, AccessRule, allows, enforce, from_token
from services.errors import Forbidden


def rule(method: str, path: str, service: str = SERVICE_TYPE) -> AccessRule:
    return AccessRule(service, method, path)


@pytest.mark.parametrize(("template", "path", "allowed"), [
    ("/v1/restore-points", "/v1/restore-points", True),
    ("/v1/restore-points", "/v1/restore-points/rp-1", False),
    ("/v1/restore-points", "/v1/restore-points\n", False),
    ("/v1/restore-points/*", "/v1/restore-points/rp-1", True),
    ("/v1/restore-points/{id}", "/v1/restore-points/rp-1", True),
    ("/v1/restore-points/*", "/v1/restore-points/rp-1/restore", False),
    ("/v1/restore-points/*", "/v1/restore-points/", False),
    ("/v1/restore-points/**", "/v1/restore-points/rp-1/restore", True),
    ("/v1/**", "/v1/plans", True),
    ("/v1/plans.json", "/v1/plansxjson", False),  # a literal dot, not any character
    ("/v1/(plans|jobs)", "/v1/jobs", False),      # nor a regular expression
    ("", "/v1/plans", False),
])
def test_path_templates(template: str, path: str, allowed: bool) -> None:
    assert allows([rule("GET", template)], "GET", path) is allowed


def test_the_method_and_the_service_must_match_too() -> None:
    rules = [rule("GET", "/v1/restore-points"), rule("POST", "/v1/backups", "volumev3")]
    assert not allows(rules, "POST", "/v1/restore-points")
    assert not allows(rules, "get", "/v1/restore-points")
    assert not allows(rules, "POST", "/v1/backups")


def test_a_refusal_says_what_the_credential_allows() -> None:
    enforce(None, "DELETE", "/v1/plans/p")  # no rules: whatever the roles allow
    with pytest.raises(Forbidden, match=r"do not allow GET /v1/plans on volume-backup "
                                        r"\(it allows GET /v1/restore-points on "
                                        r"volume-backup\)"):
        enforce([rule("GET", "/v1/restore-points")], "GET", "/v1/plans")
    with pytest.raises(Forbidden, match="it lists nothing on volume-backup"):
        enforce([rule("GET", "/v3/volumes", "volumev3")], "GET", "/v1/plans")
    with pytest.raises(Forbidden):
        enforce([], "GET", "/v1/plans")


def test_rules_are_read_from_the_token_and_a_rule_missing_a_field_allows_nothing() -> None:
    assert from_token({"project": {"id": "p"}}) is None
    assert from_token({"application_credential": {"id": "a", "restricted": True}}) is None
    rules = from_token({"application_credential": {"access_rules": [
        {"id": "r1", "service": SERVICE_TYPE, "method": "GET", "path": "/v1/jobs"},
        {"id": "r2", "service": SERVICE_TYPE, "path": "/v1/plans"}]}})
    assert rules is not None
    assert allows(rules, "GET", "/v1/jobs")
    assert not allows(rules, "GET", "/v1/plans")
    assert not allows(rules, "", "/v1/plans")


def test_the_service_type_is_the_one_cairn_registers() -> None:
    from cairnclient.config import SERVICE_TYPE as REGISTERED

    assert SERVICE_TYPE == REGISTERED
