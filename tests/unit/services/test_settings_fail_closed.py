"""Settings that fail closed: nothing runs without an explicit auth strategy, noauth only in
an explicit development environment, and the cloud's administrators only by Keystone id."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from services.settings import Settings, get_settings, settings_for

ADMIN_ID = "0123456789abcdef0123456789abcdef"
KEYSTONE = {"auth_url": "http://keystone:5000/v3", "username": "cairn",
            "password": "hunter2-secret"}


@pytest.fixture(autouse=True)
def _nothing_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.startswith("CAIRN_"):
            monkeypatch.delenv(name)
    get_settings.cache_clear()


def test_without_an_auth_strategy_there_are_no_settings() -> None:
    with pytest.raises(ValidationError, match=r"CAIRN_AUTH_STRATEGY is not set: set it to "
                                              r"keystone .* or, .* noauth with "
                                              r"CAIRN_ENVIRONMENT=development"):
        Settings()
    with pytest.raises(ValidationError, match="CAIRN_AUTH_STRATEGY is not set"):
        Settings(database_url="sqlite://", environment="development")


@pytest.mark.parametrize("environment", [None, "production"])
def test_noauth_needs_development_said_explicitly(environment: str | None) -> None:
    values = {} if environment is None else {"environment": environment}
    with pytest.raises(ValidationError, match=r"noauth .* only with CAIRN_ENVIRONMENT="
                                              r"development set explicitly"):
        Settings(auth_strategy="noauth", **values)  # type: ignore[arg-type]
    assert Settings(auth_strategy="noauth", environment="development").auth_strategy == "noauth"


def test_an_unset_environment_is_production() -> None:
    settings = Settings(auth_strategy="keystone", keystone=KEYSTONE)  # type: ignore[arg-type]
    assert settings.environment == "production"


@pytest.mark.parametrize("entry", ["admin", "cloud-admin", ADMIN_ID.upper(),
                                   "01234567-89ab-cdef-0123-456789abcdef", ADMIN_ID + "0",
                                   ADMIN_ID + "\n", "default", ""])
def test_keystone_admin_projects_are_ids_and_a_name_says_how_to_find_the_id(entry: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(auth_strategy="keystone", keystone=KEYSTONE,  # type: ignore[arg-type]
                 admin_projects=[ADMIN_ID, entry])
    message = str(refused.value)
    assert "Keystone project ids (32 lowercase hex digits)" in message
    assert f"openstack project show {entry} -f value -c id" in message


def test_keystone_ids_are_accepted_and_noauth_takes_its_project_headers() -> None:
    settings = Settings(auth_strategy="keystone", keystone=KEYSTONE,  # type: ignore[arg-type]
                        admin_projects=[ADMIN_ID])
    assert settings.admin_projects == [ADMIN_ID]
    noauth = Settings(auth_strategy="noauth", environment="development",
                      admin_projects=["admin"])
    assert noauth.admin_projects == ["admin"]


def test_a_process_refuses_to_start_naming_what_to_set_and_no_secret(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as unset:
        settings_for("cairn-worker")
    assert str(unset.value).startswith("cairn-worker: refusing to start: CAIRN_AUTH_STRATEGY "
                                       "is not set")
    get_settings.cache_clear()
    monkeypatch.setenv("CAIRN_AUTH_STRATEGY", "keystone")
    monkeypatch.setenv("CAIRN_KEYSTONE", '{"auth_url": "http://k/v3", "username": "cairn"}')
    monkeypatch.setenv("CAIRN_KEYSTONE__PASSWORD", "hunter2-secret")
    monkeypatch.setenv("CAIRN_ADMIN_PROJECTS", '["admin"]')
    with pytest.raises(SystemExit) as named:
        settings_for("cairn-api")
    assert "openstack project show admin -f value -c id" in str(named.value)
    assert "hunter2-secret" not in str(named.value)
    get_settings.cache_clear()
    monkeypatch.setenv("CAIRN_ADMIN_PROJECTS", f'["{ADMIN_ID}"]')
    monkeypatch.setenv("CAIRN_BACKUP_TARGETS", '{"local": {"cluster": "ceph-a"}}')
    with pytest.raises(SystemExit) as field:
        settings_for("cairn-scheduler")
    assert "CAIRN_BACKUP_TARGETS.local.pool: Field required" in str(field.value)
    get_settings.cache_clear()
