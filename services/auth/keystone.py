"""Token validation against Keystone with Cairn's service credentials, cached for a short,
configurable time and never past the token's own expiry (as keystonemiddleware does), and
the caller it makes: the token's project and roles, Cairn's cloud administrator when that
project is one of `admin_projects` (by id), and an application credential's access rules
enforced on each request."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session

from services.auth import access_rules
from services.auth.access_rules import AccessRule
from services.context import RequestContext
from services.errors import ServiceUnavailable, Unauthorized
from services.openstack.identity import IDENTITY

log = logging.getLogger(__name__)

CACHE_SIZE = 10_000
REFRESH_AHEAD_SECONDS = 10.0
"""A token in use this close to the end of its cache time is checked again in the
background (api/token_checks.py), so an active caller never waits for its recheck."""


@dataclass(frozen=True)
class TokenInfo:
    user_id: str
    project_id: str
    roles: frozenset[str]
    expires_at: datetime
    endpoints: dict[str, str]
    access_rules: tuple[AccessRule, ...] | None = None
    """An application credential's access rules; None: whatever the roles allow."""

    def context(self, token: str, method: str, path: str,
                admin_projects: frozenset[str] = frozenset()) -> RequestContext:
        """The caller of the request `method path` made with this token; refused (403)
        when the token's access rules do not list the request."""
        access_rules.enforce(self.access_rules, method, path)
        # By id only: a project's name is unique only within its domain, so any domain's
        # admin could make a project called like the admin project (issue 31).
        cloud_admin = "admin" in self.roles and self.project_id in admin_projects
        return RequestContext(project_id=self.project_id, roles=self.roles,
                              user_id=self.user_id, token=token, endpoints=self.endpoints,
                              cloud_admin=cloud_admin)


def _cache_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenValidator:
    def __init__(self, session: ks_session.Session, *, cache_seconds: float,
                 region: str | None = None, interface: str = "public",
                 admin_projects: frozenset[str] = frozenset(),
                 now: Callable[[], float] = time.time) -> None:
        self.session = session
        self.admin_projects = admin_projects
        self.cache_seconds = cache_seconds
        self.region = region
        self.interface = interface
        self.now = now
        self._cache: OrderedDict[str, tuple[float, TokenInfo]] = OrderedDict()
        """Tokens Keystone validated: (trusted without asking until, what it said). Kept
        until the token itself expires, past the cache time, as the proof that the token was
        valid once: its recheck then goes to the lane of known users (`known`)."""
        self._refused: OrderedDict[str, tuple[float, str]] = OrderedDict()
        """Tokens Keystone refused, for the same time: a client repeating a garbage token
        must not cost a Keystone call (and a thread) per request."""
        self._lock = threading.Lock()

    def context_for(self, token: str, method: str, path: str) -> RequestContext:
        """The caller of the request `method path` (the token's access rules are checked
        against it)."""
        return self.context_of(self.validate(token), token, method, path)

    def context_of(self, info: TokenInfo, token: str, method: str,
                   path: str) -> RequestContext:
        """The caller of the request `method path` made with a token validated as `info`:
        a token's check is shared by every request bringing it, its access rules are not."""
        return info.context(token, method, path, self.admin_projects)

    def cached_context(self, token: str, method: str, path: str) -> RequestContext | None:
        """`context_for` of a token validated less than the cache time ago, without
        blocking; None when only Keystone can tell. Raises Unauthorized for a token refused
        as recently."""
        key = _cache_key(token)
        self._raise_if_refused(key)
        info = self._cached(key)
        return None if info is None else info.context(token, method, path, self.admin_projects)

    def known(self, token: str) -> TokenInfo | None:
        """What Keystone said when it last validated the token, while the token has not
        expired (whether or not the cache time has passed); None for a token it never
        validated here, refused since, or one dropped (`forget`)."""
        with self._lock:
            cached = self._cache.get(_cache_key(token))
        if cached is None or cached[1].expires_at.timestamp() <= self.now():
            return None
        return cached[1]

    def refresh_due(self, token: str) -> bool:
        """The token is trusted from the cache for less than `REFRESH_AHEAD_SECONDS` (or a
        quarter of the cache time) more: time to recheck it before its caller has to wait."""
        with self._lock:
            cached = self._cache.get(_cache_key(token))
        if cached is None:
            return False
        left = cached[0] - self.now()
        return 0 < left < min(REFRESH_AHEAD_SECONDS, self.cache_seconds / 4)

    def remember(self, token: str, body: dict[str, Any]) -> TokenInfo:
        """A token Keystone has just issued, from its answer (the body of POST /auth/tokens
        holds what validating the token would): trusted as if validated now."""
        info = self._info(body)
        self._trust(_cache_key(token), info)
        return info

    def forget(self, token: str, reason: str) -> None:
        """Drop a token this process trusts (a portal session signed out) and refuse it with
        `reason` for the cache time, whatever Keystone says about it meanwhile."""
        key = _cache_key(token)
        with self._lock:
            self._cache.pop(key, None)
        self._remember_refusal(key, Unauthorized(reason))

    def _raise_if_refused(self, key: str) -> None:
        with self._lock:
            refused = self._refused.get(key)
        if refused is not None and refused[0] > self.now():
            raise Unauthorized(refused[1])

    def _remember_refusal(self, key: str, error: Unauthorized) -> None:
        with self._lock:
            self._cache.pop(key, None)  # no longer known either
            self._refused[key] = (self.now() + self.cache_seconds, error.message)
            while len(self._refused) > CACHE_SIZE:
                self._refused.popitem(last=False)

    def _cached(self, key: str) -> TokenInfo | None:
        with self._lock:
            cached = self._cache.get(key)
        return cached[1] if cached is not None and cached[0] > self.now() else None

    def validate(self, token: str, *, recheck: bool = False) -> TokenInfo:
        """What Keystone says of the token: from the cache within the cache time, unless
        `recheck` (a refresh before the cache time runs out)."""
        key = _cache_key(token)
        self._raise_if_refused(key)
        cached = None if recheck else self._cached(key)
        if cached is not None:
            return cached
        try:
            info = self._ask_keystone(token)
        except Unauthorized as exc:
            self._remember_refusal(key, exc)
            raise
        self._trust(key, info)
        return info

    def _trust(self, key: str, info: TokenInfo) -> None:
        now = self.now()
        expires = info.expires_at.timestamp()
        if expires <= now:
            error = Unauthorized("the token has expired; get a new one (openstack token issue)")
            self._remember_refusal(key, error)
            raise error
        until = min(now + self.cache_seconds, expires)
        with self._lock:
            self._cache[key] = (until, info)
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)

    def _ask_keystone(self, token: str) -> TokenInfo:
        try:
            # Saying that Cairn enforces access rules: Keystone refuses to validate a token
            # with access rules for a service that does not.
            response = self.session.get("/auth/tokens", endpoint_filter=IDENTITY,
                                        headers={"X-Subject-Token": token,
                                                 **access_rules.HEADER}, raise_exc=False)
        except ks_exc.ClientException:
            log.warning("Keystone could not be reached to check a token", exc_info=True)
            raise ServiceUnavailable("Keystone could not be reached to check the token; try "
                                     "again in a few seconds") from None
        if response.status_code in (401, 404):
            raise Unauthorized("the token is invalid or has expired; get a new one "
                               "(openstack token issue)")
        if response.status_code != 200:
            raise ServiceUnavailable(f"Keystone answered {response.status_code} when checking "
                                     "the token; try again later")
        return self._info(response.json()["token"])

    def _info(self, body: dict[str, Any]) -> TokenInfo:
        project = body.get("project")
        if project is None:
            raise Unauthorized("the token is not scoped to a project; Cairn's objects belong "
                               "to projects (request a project-scoped token)")
        endpoints: dict[str, str] = {}
        for service in body.get("catalog", []):
            for endpoint in service.get("endpoints", []):
                if endpoint.get("interface") != self.interface:
                    continue
                if self.region is not None and endpoint.get("region_id") != self.region:
                    continue
                endpoints.setdefault(service["type"], endpoint["url"])
        return TokenInfo(
            user_id=body["user"]["id"], project_id=project["id"],
            roles=frozenset(r["name"] for r in body.get("roles", [])),
            expires_at=datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
            .astimezone(UTC),
            endpoints=endpoints, access_rules=access_rules.from_token(body))
