"""keystoneauth1 sessions as Cairn makes them."""

from __future__ import annotations

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from keystoneauth1.plugin import BaseAuthPlugin

from services.settings import KeystoneSettings

# uwsgi's http-socket (how Debian serves Keystone and cinder-api) closes each connection
# after the response; without this header keystoneauth's pool reuses dead sockets.
CLOSE = {"Connection": "close"}

TIMEOUT_SECONDS = 30.0
"""A call's timeout (each read, not the whole answer)."""


def make_session(auth: BaseAuthPlugin | None, *, timeout: float = TIMEOUT_SECONDS,
                 verify: bool | str = True) -> ks_session.Session:
    return ks_session.Session(auth=auth, timeout=timeout, verify=verify,
                              additional_headers=dict(CLOSE), app_name="cairn",
                              connect_retries=2)


def password_auth(auth_url: str, username: str, password: str, project_name: str, *,
                  user_domain_name: str = "Default",
                  project_domain_name: str = "Default") -> v3.Password:
    return v3.Password(auth_url=auth_url, username=username, password=password,
                       project_name=project_name, user_domain_name=user_domain_name,
                       project_domain_name=project_domain_name)


def service_session(settings: KeystoneSettings, *,
                    project_id: str | None = None) -> ks_session.Session:
    """Cairn's service user, in its own project, or in `project_id` (what it creates there,
    such as an adopted volume, belongs to that project)."""
    if project_id is not None:
        return make_session(v3.Password(
            auth_url=settings.auth_url, username=settings.username,
            password=settings.password.get_secret_value(), project_id=project_id,
            user_domain_name=settings.user_domain_name))
    return make_session(password_auth(
        settings.auth_url, settings.username, settings.password.get_secret_value(),
        settings.project_name,
        user_domain_name=settings.user_domain_name,
        project_domain_name=settings.project_domain_name))
