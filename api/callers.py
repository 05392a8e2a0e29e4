"""Who is calling, decided at the door (`api/gate.py`) before the request may take a slot, and
nowhere else: `api/deps.py` and the session routes take the `Caller` found here and never
read a credential again, nor ask Keystone.

The gate used to key a client by its peer address and a hash of whatever credential it
sent, and to authenticate only once the request held a slot: a client varying a garbage
token was a new client each time, every garbage token held a process slot while Keystone
was asked about it, and every portal user behind one proxy shared one key. Now:

- A request carrying a Keystone token is authenticated first (`api/token_checks.py`): from
  the cache at once, else by a Keystone check in a lane of its own, without a slot. A token
  that cannot be used is answered at the door (401, 403, 429, 503). Its slots are then the
  validated caller's: project and user.
- The portal's cookie stands for its token when it opens under the session key and was not
  signed out (`PortalSignOuts`); a cookie that does not is no credential, and the request
  goes on as an anonymous one (the portal's page still loads; the API's routes say 401).
  Signing out needs the session only: its token is not checked (Keystone may be down, or
  the token revoked, and the session must still end).
- Anything else is anonymous and keyed by its client network (`api/peers.py`).
- noauth (development) trusts the project a request names, as its routes do, and keys it
  by client network all the same: naming another project makes no new client."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from starlette.requests import cookie_parser
from starlette.types import Scope

from api.peers import Network, client_address, client_network
from api.token_checks import TokenChecks
from services.auth.portal_sessions import PortalSession, SessionSeal
from services.auth.portal_signouts import PortalSignOuts
from services.context import RequestContext
from services.errors import CairnError

log = logging.getLogger(__name__)

MAX_TOKEN_BYTES = 8192
"""As the X-Auth-Token header's own bound (api/deps.py): a longer one is not sent to
Keystone; the route refuses it (422)."""

SESSION_PATH = "/v1/session"
"""The portal session's routes (api/routers/session.py). Signing out (DELETE) needs no
Keystone check of the session's token."""


@dataclass(frozen=True)
class Caller:
    key: str
    """Whose share of the process's slots the request takes."""
    address: str
    """The client's address (`api/peers.py`)."""
    network: str
    """What counts as one client for limits: an IPv4 address, an IPv6 /48."""
    presented: Literal["token", "session", "none"] = "none"
    """The credential the request brought: an X-Auth-Token (keystone), the portal's
    session cookie (and no X-Auth-Token or X-Project-Id), or neither."""
    context: RequestContext | None = None
    """The validated caller, when the request brought a valid token or portal session."""
    session: PortalSession | None = None
    """The portal session the cookie opened to, if any (not signed out)."""
    error: CairnError | None = None
    """Why the portal session's token cannot be used now; its API requests answer this."""
    session_error: CairnError | None = None
    """The portal's session store could not say whether the session was signed out: no
    request may use it, not even to sign out."""

    @property
    def anonymous(self) -> bool:
        """No credential anyone vouched for: not validated, not a portal session, not a
        development caller naming its project."""
        return self.context is None and self.session is None \
            and not self.key.startswith("noauth:")


class Callers:
    """Finds a request's `Caller` (see the module's docstring)."""

    def __init__(self, *, checks: TokenChecks | None, seal: SessionSeal,
                 sign_outs: PortalSignOuts, cookie: str,
                 trusted_proxies: Sequence[Network]) -> None:
        self.checks = checks
        self.seal = seal
        self.sign_outs = sign_outs
        self.cookie = cookie
        self.trusted_proxies = trusted_proxies

    async def find(self, scope: Scope, headers: Mapping[bytes, bytes],
                   now: datetime) -> Caller:
        """`headers` hold one value each (the gate refuses a request repeating one of
        these). Raises Unauthorized, Forbidden, TooManyRequests or ServiceUnavailable for a
        token sent in X-Auth-Token that cannot be used: the door answers those itself."""
        address = client_address(scope, self.trusted_proxies)
        network = client_network(address)
        anonymous = Caller(f"client:{network}", address, network)
        token_header = headers.get(b"x-auth-token")
        project_header = headers.get(b"x-project-id")
        method, path = scope["method"], scope["path"]
        if self.checks is not None and token_header:
            token = token_header.decode("latin-1")
            if len(token) > MAX_TOKEN_BYTES:
                return replace(anonymous, presented="token")
            context = await self.checks.context(token, network, method, path)
            return self._validated(context, anonymous, "token")
        if self.checks is None and project_header:
            return replace(anonymous, key=f"noauth:{network}")
        if token_header is not None or project_header is not None:
            return anonymous
        raw = headers.get(b"cookie")
        value = None if raw is None else cookie_parser(raw.decode("latin-1")).get(self.cookie)
        if not value:
            return anonymous
        presented = replace(anonymous, presented="session")
        session = self.seal.open(value, now)
        if session is None:
            return presented
        try:
            if await self.sign_outs.signed_out(session):
                return presented
        except CairnError as exc:
            return replace(presented, session=session, session_error=exc)
        if self.checks is None:
            return replace(presented, key=f"noauth:{network}", session=session)
        if (method, path) == ("DELETE", SESSION_PATH):
            return replace(presented, session=session)
        assert session.token is not None
        try:
            # Cairn sealed the session after Keystone issued its token: its recheck goes to
            # the lane of known users, whichever process validated it last.
            context = await self.checks.context(
                session.token, network, method, path,
                vouched_for=f"{session.project_id}/{session.user_name}")
        except CairnError as exc:
            return replace(presented, session=session, error=exc)
        return replace(self._validated(context, anonymous, "session"), session=session)

    @staticmethod
    def _validated(context: RequestContext, anonymous: Caller,
                   presented: Literal["token", "session"]) -> Caller:
        who = context.user_id or hashlib.sha256((context.token or "").encode()).hexdigest()[:16]
        return replace(anonymous, key=f"user:{context.project_id}/{who}", presented=presented,
                       context=context)
