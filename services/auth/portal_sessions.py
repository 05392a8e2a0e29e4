"""The portal's sign-in, as OpenStack consoles do it (Skyline's API server is the model): the
browser sends the user's domain, name and password once; Cairn gets the Keystone tokens and
hands the browser only a sealed, HttpOnly, SameSite=Strict cookie, so no script in the page
ever holds a token. A change made with that cookie must also carry the session's CSRF token
in a header, which a page of another site cannot read.

The cookie is the session's only copy (AES-256-GCM under the deployment's key): any API
process of the deployment serves any request. Signing out revokes the tokens at Keystone,
drops them from the process's token cache, and records the session as signed out until it
would have expired (`portal_signouts.py`), so a copy of the cookie opens nowhere even when
Keystone could not revoke its tokens.

The cookie is `__Host-cairn_session`: Secure, Path=/ and no Domain, so neither a page served
over plain HTTP nor a sibling subdomain can set or overwrite it (session fixation)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from keystoneauth1 import exceptions as ks_exc

from services.context import RequestContext
from services.errors import Forbidden, ServiceUnavailable, Unauthorized
from services.openstack.sessions import make_session
from services.settings import Settings
from services.settings import read_keys as read_key_ring

log = logging.getLogger(__name__)

COOKIE = "__Host-cairn_session"
"""The browser keeps a `__Host-` cookie only when it is Secure, for Path=/ and without a
Domain: no other host (a sibling subdomain) and no plain-HTTP page can plant or replace it."""
PLAIN_COOKIE = "cairn_session"
"""`portal_cookie_secure` false (development over plain HTTP on a non-loopback address)."""
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
NOAUTH_HOURS = 12
"""How long a noauth (development) session lasts; Keystone's sessions last as long as the
token Keystone gave."""
_AAD = b"cairn portal session v1"


@dataclass(frozen=True)
class Project:
    id: str
    name: str


@dataclass(frozen=True)
class PortalSession:
    csrf: str
    expires_at: datetime
    project_id: str
    user_name: str
    token: str | None = field(default=None, repr=False)
    """The project-scoped Keystone token (auth_strategy keystone)."""
    unscoped: str | None = field(default=None, repr=False)
    """The unscoped one: switching projects asks Keystone with it, not the password."""
    roles: tuple[str, ...] = ()
    """The roles a noauth session chose; Keystone's come from the token."""

    def noauth_context(self, admin_projects: frozenset[str]) -> RequestContext:
        """The caller a noauth session stands for: its project and roles, as X-Project-Id
        and X-Roles would say."""
        return noauth_context(self.project_id, frozenset(self.roles), admin_projects)

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at

    def csrf_matches(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf.encode())

    @property
    def id(self) -> str:
        """Names the session where it is recorded as signed out; tells nothing of its CSRF
        token."""
        return hashlib.sha256(b"cairn session id " + self.csrf.encode()).hexdigest()


@dataclass(frozen=True)
class SignedIn:
    """A session Keystone has just issued the token of."""

    session: PortalSession
    issued: dict[str, Any] = field(repr=False)
    """Keystone's answer about the project-scoped token (the body of POST /auth/tokens):
    what validating it would say, so Cairn need not ask again."""
    projects: tuple[Project, ...] = ()
    """The projects the user may switch to, when Keystone was asked on the way."""


def cookie_name(secure: bool) -> str:
    return COOKIE if secure else PLAIN_COOKIE


def noauth_context(project_id: str, roles: frozenset[str],
                   admin_projects: frozenset[str]) -> RequestContext:
    """A noauth caller (development): the project and roles it says. The cloud's
    administrator is the admin role in a project of `admin_projects`, the rule Keystone's
    callers meet, so a development stack answers as production would (a project's own
    admin is not the cloud's)."""
    return RequestContext(project_id=project_id, roles=roles,
                          cloud_admin="admin" in roles and project_id in admin_projects)


def new_csrf() -> str:
    return secrets.token_urlsafe(32)


class SessionSeal:
    """Seals a session into a cookie value under the current key and opens it again under
    the current or a previous one (key rotation); a value that was changed, was sealed under
    another key, or has expired opens as None."""

    def __init__(self, key: bytes, *previous: bytes) -> None:
        self._aead = AESGCM(key)
        self._openers = [self._aead, *(AESGCM(k) for k in previous)]

    @classmethod
    def from_settings(cls, settings: Settings) -> SessionSeal:
        if settings.portal_session_key_file is None:
            log.warning("CAIRN_PORTAL_SESSION_KEY_FILE is not set: portal sessions end when "
                        "this process does and are not shared with other API processes")
            return cls(secrets.token_bytes(32))
        return cls(*read_keys(settings.portal_session_key_file))

    def seal(self, session: PortalSession) -> str:
        body = asdict(session)
        body["expires_at"] = session.expires_at.isoformat()
        nonce = secrets.token_bytes(12)
        sealed = self._aead.encrypt(nonce, json.dumps(body).encode(), _AAD)
        return base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def open(self, value: str, now: datetime) -> PortalSession | None:
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
            body = json.loads(self._decrypt(raw))
            body["expires_at"] = datetime.fromisoformat(body["expires_at"])
            body["roles"] = tuple(body["roles"])
            session = PortalSession(**body)
        except (ValueError, binascii.Error, InvalidTag, TypeError, KeyError):
            return None
        return None if session.expired(now) else session

    def _decrypt(self, raw: bytes) -> bytes:
        for aead in self._openers:
            try:
                return aead.decrypt(raw[:12], raw[12:], _AAD)
            except InvalidTag:
                continue
        raise InvalidTag


def read_keys(path: Path) -> list[bytes]:
    """The session keys in a key file: 64 hex digits a line, the current one first (blank
    lines and lines starting with # are skipped)."""
    return read_key_ring(path, "the portal's session key file")


class KeystoneSignIn:
    """The user's own calls to Keystone: password to an unscoped token, the projects it may
    scope to, a project-scoped token, revocation."""

    def __init__(self, auth_url: str, timeout: float = 15.0) -> None:
        self.auth_url = auth_url.rstrip("/")
        self.session = make_session(None, timeout=timeout)

    def sign_in(self, domain: str, username: str, password: str,
                project_id: str | None) -> SignedIn:
        response = self._call("POST", "/auth/tokens", json={"auth": {"identity": {
            "methods": ["password"], "password": {"user": {
                "name": username, "domain": {"name": domain}, "password": password}}}}})
        if response.status_code == 401:
            raise Unauthorized("the domain, user name or password is wrong")
        self._expect(response, 201, "sign in")
        unscoped = response.headers["X-Subject-Token"]
        projects = self.projects(unscoped)
        if not projects:
            self.revoke(unscoped)
            raise Forbidden(f"user {username!r} has no role in any project; ask the project's "
                            "administrator for one")
        chosen = project_id or projects[0].id
        signed = self.scope(unscoped, chosen, username)
        return SignedIn(signed.session, signed.issued, tuple(projects))

    def scope(self, unscoped: str, project_id: str, user_name: str) -> SignedIn:
        response = self._call("POST", "/auth/tokens", json={"auth": {
            "identity": {"methods": ["token"], "token": {"id": unscoped}},
            "scope": {"project": {"id": project_id}}}})
        if response.status_code in (401, 403, 404):
            raise Forbidden(f"you have no role in project {project_id!r}; pick one of the "
                            "projects listed", field="project_id")
        self._expect(response, 201, "switch projects")
        token = response.headers["X-Subject-Token"]
        issued = response.json()["token"]
        return SignedIn(PortalSession(csrf=new_csrf(), expires_at=_expiry(issued["expires_at"]),
                                      project_id=project_id, user_name=user_name, token=token,
                                      unscoped=unscoped), issued)

    def projects(self, unscoped: str) -> list[Project]:
        response = self._call("GET", "/auth/projects", headers={"X-Auth-Token": unscoped})
        if response.status_code in (401, 404):
            raise Unauthorized("your session has ended; sign in again")
        self._expect(response, 200, "list your projects")
        return sorted((Project(p["id"], p["name"]) for p in response.json()["projects"]
                       if p.get("enabled", True)), key=lambda p: p.name)

    def revoke(self, token: str) -> bool:
        """Whether Keystone revoked the token (or had it gone already, which is what signing
        out wants anyway); False when it could not be reached or refused."""
        try:
            response = self.session.request(
                self.auth_url + "/auth/tokens", "DELETE", raise_exc=False,
                headers={"X-Auth-Token": token, "X-Subject-Token": token})
        except ks_exc.ClientException:
            log.warning("Keystone could not be reached to revoke a portal token",
                        exc_info=True)
            return False
        if response.status_code in (204, 401, 404):
            return True
        log.warning("Keystone answered %s when asked to revoke a portal token",
                    response.status_code)
        return False

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return self.session.request(self.auth_url + path, method, raise_exc=False,
                                        **kwargs)
        except ks_exc.ClientException:
            log.warning("Keystone could not be reached for a portal sign-in", exc_info=True)
            raise ServiceUnavailable("Keystone could not be reached; try again in a few "
                                     "seconds") from None

    @staticmethod
    def _expect(response: Any, status: int, doing: str) -> None:
        if response.status_code != status:
            raise ServiceUnavailable(f"Keystone answered {response.status_code} when asked to "
                                     f"{doing}; try again later")


def noauth_session(project_id: str, roles: tuple[str, ...], now: datetime) -> PortalSession:
    return PortalSession(csrf=new_csrf(), expires_at=now + timedelta(hours=NOAUTH_HOURS),
                         project_id=project_id, user_name="(noauth)", roles=roles)


def _expiry(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
