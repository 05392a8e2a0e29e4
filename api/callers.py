"""Who is calling, decided at the door (`api/gate.py`) before the request may take a slot.

The gate used to key a client by its peer address and a hash of whatever credential it
sent, and to authenticate only once the request held a slot: a client varying a garbage
token was a new client each time, every garbage token held a process slot while Keystone
was asked about it, and every portal user behind one proxy shared one key. Now:

- A request carrying a Keystone token is authenticated first. A token in the validator's
  cache (valid or refused) is decided at once, in the event loop, with no thread and no
  wait. An unknown token is checked by `TokenChecks`: at most `api_token_checks` Keystone
  calls at once on threads of their own, each request waiting at most
  `api_token_check_timeout_seconds`, and at most `api_token_checks_per_client` unknown
  tokens of one client address waiting at once (429 beyond). A refused token is answered
  401 at the door. Its slots are then the validated caller's: project and user.
- The portal's cookie stands for its token when it opens under the session key and was not
  signed out (`PortalSignOuts`); a cookie that does not is no credential, and the request
  goes on as an anonymous one (the portal's page still loads; the API's routes say 401).
- Anything else is anonymous and keyed by its client address (`api/peers.py`).
- noauth (development) trusts the project a request names, as its routes do.

`Caller` travels in the request's scope to `api/deps.py`, which never asks Keystone again."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime

from starlette.requests import cookie_parser
from starlette.types import Scope

from api.peers import Network, client_address, client_network
from services.auth.keystone import TokenInfo, TokenValidator
from services.auth.portal_sessions import PortalSession, SessionSeal
from services.auth.portal_signouts import PortalSignOuts
from services.context import RequestContext
from services.errors import CairnError, ServiceUnavailable, TooManyRequests

log = logging.getLogger(__name__)

MAX_TOKEN_BYTES = 8192
"""As the X-Auth-Token header's own bound (api/deps.py): a longer one is not sent to
Keystone; the route refuses it (422)."""


@dataclass(frozen=True)
class Caller:
    key: str
    """Whose share of the process's slots the request takes."""
    address: str
    """The client's address (`api/peers.py`)."""
    network: str
    """What counts as one client for limits: the address, or an IPv6 address's /64."""
    context: RequestContext | None = None
    """The validated caller, when the request brought a valid token or portal session."""
    token: str | None = None
    """The token `context` was validated from (the header's, or the portal session's)."""
    session: PortalSession | None = None
    """The portal session the cookie opened to, if any (not signed out)."""
    error: CairnError | None = None
    """Why the portal session's token could not be used; its API requests answer this."""


class TokenChecks:
    """Keystone checks of tokens the validator has not decided yet: bounded in number, in
    time and per client address, on threads of their own, and shared by every request that
    brings the same token while its check runs."""

    def __init__(self, validator: TokenValidator, *, concurrency: int, per_client: int,
                 timeout: float) -> None:
        self.validator = validator
        self.per_client = per_client
        self.timeout = timeout
        self._executor = ThreadPoolExecutor(max_workers=concurrency,
                                             thread_name_prefix="token-check")
        self._concurrency = concurrency
        self._slots: asyncio.Semaphore | None = None
        self._running: dict[str, asyncio.Future[TokenInfo]] = {}
        self._waiting: dict[str, int] = {}
        """Requests waiting for each running check: one nobody waits for any more (they
        all timed out) is dropped before it reaches Keystone."""
        self._by_client: dict[str, int] = {}

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def context(self, token: str, address: str, method: str,
                      path: str) -> RequestContext:
        """The token's caller of the request `method path`; Unauthorized, Forbidden (its
        access rules do not list the request), TooManyRequests or ServiceUnavailable."""
        # Raises for a token refused lately.
        cached = self.validator.cached_context(token, method, path)
        if cached is not None:
            return cached
        info = await self._validated(token, address)
        return self.validator.context_of(info, token, method, path)

    async def _validated(self, token: str, address: str) -> TokenInfo:
        key = hashlib.sha256(token.encode()).hexdigest()
        check = self._running.get(key)
        if check is None:
            if self._by_client.get(address, 0) >= self.per_client:
                raise TooManyRequests(
                    f"{self.per_client} tokens from your address are being checked with "
                    "Keystone already; send the next one when they are answered",
                    retry_after=1)
            self._by_client[address] = self._by_client.get(address, 0) + 1
            check = asyncio.ensure_future(self._check(token, key))
            self._running[key] = check
            check.add_done_callback(lambda done: self._finished(done, key, address))
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            # shield: one waiter's timeout must not cancel the check others share.
            return await asyncio.wait_for(asyncio.shield(check), self.timeout)
        except TimeoutError:
            raise ServiceUnavailable(f"Keystone did not check the token within "
                                     f"{self.timeout:g} s; try again shortly") from None
        finally:
            left = self._waiting[key] - 1
            if left:
                self._waiting[key] = left
            else:
                del self._waiting[key]

    def _finished(self, done: asyncio.Future[TokenInfo], key: str, address: str) -> None:
        if not done.cancelled():
            done.exception()  # seen, if every waiter had given up on it already
        self._running.pop(key, None)
        remaining = self._by_client.get(address, 1) - 1
        if remaining:
            self._by_client[address] = remaining
        else:
            self._by_client.pop(address, None)

    async def _check(self, token: str, key: str) -> TokenInfo:
        if self._slots is None:  # made on first use, inside the server's event loop
            self._slots = asyncio.Semaphore(self._concurrency)
        await self._slots.acquire()
        if not self._waiting.get(key):
            self._slots.release()
            raise ServiceUnavailable("nobody waits for this token's check any more")
        loop = asyncio.get_running_loop()
        try:
            thread = loop.run_in_executor(self._executor, self.validator.validate, token)
        except BaseException:
            self._slots.release()
            raise
        # The slot is the thread's: given back when Keystone has answered (or the HTTP
        # timeout ended the call), never earlier, so threads stay within the bound
        # whatever the waiters do.
        slots = self._slots
        thread.add_done_callback(lambda _done: slots.release())
        return await thread


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

    def address(self, scope: Scope) -> str:
        return client_address(scope, self.trusted_proxies)

    async def find(self, scope: Scope, headers: dict[bytes, bytes], now: datetime) -> Caller:
        """Raises Unauthorized, TooManyRequests or ServiceUnavailable for a token sent in
        X-Auth-Token that cannot be used: the door answers those itself."""
        address = self.address(scope)
        network = client_network(address)
        anonymous = Caller(f"client:{network}", address, network)
        token_header = headers.get(b"x-auth-token")
        project_header = headers.get(b"x-project-id")
        if self.checks is not None and token_header:
            token = token_header.decode("latin-1")
            if len(token) > MAX_TOKEN_BYTES:
                return anonymous
            context = await self.checks.context(token, network, scope["method"], scope["path"])
            return self._validated(context, token, anonymous)
        if token_header is None and project_header is None:
            session, unusable = await self._portal_session(headers, now)
            if unusable is not None:
                return replace(anonymous, session=session, error=unusable)
            if session is not None:
                if self.checks is None:
                    return replace(anonymous, key=f"noauth:{network}/{session.project_id}",
                                   session=session)
                assert session.token is not None
                try:
                    context = await self.checks.context(session.token, network, scope["method"],
                                                        scope["path"])
                except CairnError as exc:
                    return replace(anonymous, session=session, error=exc)
                return self._validated(context, session.token, anonymous, session)
        if self.checks is None and project_header:
            # noauth: the project a request names is who it is, as the routes take it.
            project = hashlib.sha256(project_header).hexdigest()[:16]
            return replace(anonymous, key=f"noauth:{network}/{project}")
        return anonymous

    @staticmethod
    def _validated(context: RequestContext, token: str, anonymous: Caller,
                   session: PortalSession | None = None) -> Caller:
        who = context.user_id or hashlib.sha256(token.encode()).hexdigest()[:16]
        return replace(anonymous, key=f"user:{context.project_id}/{who}", context=context,
                       token=token, session=session)

    async def _portal_session(self, headers: dict[bytes, bytes], now: datetime
                              ) -> tuple[PortalSession | None, CairnError | None]:
        """The session the cookie opens to (None when there is none, it does not open, or
        it was signed out), or why it cannot be told."""
        raw = headers.get(b"cookie")
        value = None if raw is None else cookie_parser(raw.decode("latin-1")).get(self.cookie)
        if not value:
            return None, None
        session = self.seal.open(value, now)
        if session is None:
            return None, None
        try:
            if await self.sign_outs.signed_out(session):
                return None, None
        except ServiceUnavailable as exc:
            return session, exc
        return session, None
