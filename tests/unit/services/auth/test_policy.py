"""The policy rules: defaults, overrides from a file, and refusals that say why."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.auth.policy import Policy, PolicyError
from services.context import RequestContext
from services.errors import Forbidden


def ctx(*roles: str, cloud_admin: bool = False) -> RequestContext:
    return RequestContext(project_id="p", roles=frozenset(roles), cloud_admin=cloud_admin)


def test_defaults_reader_member_admin() -> None:
    policy = Policy()
    assert policy.allows("plan:list", ctx("reader"))
    assert not policy.allows("plan:create", ctx("reader"))
    assert policy.allows("plan:create", ctx("member"))
    assert not policy.allows("quota:update", ctx("member"))
    # The admin role of a project is not the cloud's administrator (issue 13).
    assert not policy.allows("quota:update", ctx("admin"))
    assert policy.allows("quota:update", ctx("admin", cloud_admin=True))
    assert policy.allows("plan:create", ctx("admin"))  # a member of its own project
    assert not policy.allows("plan:list", ctx())
    assert not policy.allows("no:such-action", ctx("admin"))


def test_refusal_names_what_and_the_roles() -> None:
    with pytest.raises(Forbidden, match=r"may not delete restore points .*roles: reader"):
        Policy().enforce("restore_point:delete", ctx("reader"))


def test_file_overrides_and_expressions(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text('"backup:create": "role:backup-operator or (rule:member and not '
                    'role:auditor)"\n"plan:delete": "!"\n"plan:list": "@"\n')
    policy = Policy.from_file(path)
    assert policy.allows("backup:create", ctx("backup-operator"))
    assert policy.allows("backup:create", ctx("member"))
    assert not policy.allows("backup:create", ctx("member", "auditor"))
    assert not policy.allows("plan:delete", ctx("admin"))
    assert policy.allows("plan:list", ctx())
    assert policy.allows("plan:get", ctx("reader"))  # untouched defaults stay


@pytest.mark.parametrize(("text", "error"), [
    ('"plan:get": "rule:nope"', "refers to rule 'nope'"),
    ('"plan:get": "role:a or"', "ends too early"),
    ('"plan:get": "(role:a"', "not closed"),
    ('"plan:get": "user:x"', "unknown check"),
    ("- a list", "must map rule names"),
])
def test_bad_files_are_refused_with_the_reason(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError, match=error):
        Policy.from_file(path)


def test_project_id_check_means_the_callers_own_project(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    # What an operator used to other services writes to let a project read its own quota.
    path.write_text('"quota:get": "rule:admin or project_id:%(project_id)s"\n'
                    '"quota:update": "rule:admin or (role:admin and project_id:%(project_id)s)"\n')
    policy = Policy.from_file(path)
    member = ctx("member")  # of project p
    assert policy.allows("quota:get", member, "p")
    assert policy.allows("quota:get", member)  # a request naming no project: its own
    # Before, the check was always true: every caller read and set every project's quota.
    assert not policy.allows("quota:get", member, "q")
    assert not policy.allows("quota:update", ctx("admin"), "q")
    assert policy.allows("quota:update", ctx("admin"), "p")
    assert policy.allows("quota:update", ctx("admin", cloud_admin=True), "q")
    with pytest.raises(Forbidden, match="may not change quotas"):
        policy.enforce("quota:update", ctx("admin"), "q")


def test_only_the_clouds_administrator_restores_for_cinders_backup_service() -> None:
    """Such a restore writes over a volume Cinder holds, without taking it from Cinder:
    Cairn's Cinder backup driver runs with the cloud administrator's credentials."""
    policy = Policy()
    assert policy.allows("restore_point:restore_for_cinder_backup",
                         ctx("admin", cloud_admin=True))
    with pytest.raises(Forbidden, match="may not restore for Cinder's backup service"):
        policy.enforce("restore_point:restore_for_cinder_backup", ctx("admin", "member"))


@pytest.mark.parametrize(("overrides", "flagged"), [
    ({"admin": "role:admin"}, ["admin", "orphan:list", "quota:get", "quota:update",
                               "restore_point:restore_for_cinder_backup"]),
    ({"admin": "role:cloud_admin"}, ["admin", "orphan:list", "quota:get", "quota:update",
                                     "restore_point:restore_for_cinder_backup"]),
    ({"quota:get": "rule:reader"}, ["quota:get"]),
    ({"orphan:list": "is_admin:False or is_admin:True"}, ["orphan:list"]),
    ({"quota:update": "role:admin and project_id:%(project_id)s"}, []),
    ({"quota:get": "rule:admin or project_id:%(project_id)s"}, []),
    ({"plan:create": "@", "webhook:get_url": "rule:reader"}, []),  # within the project
    ({}, []),
])
def test_rules_that_reach_beyond_a_project_are_named(overrides: dict[str, str],
                                                     flagged: list[str]) -> None:
    assert Policy(overrides).cross_project_grants() == flagged
