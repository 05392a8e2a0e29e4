"""The portal's session: sign in (the tokens stay in a sealed HttpOnly cookie; attempts are
throttled per client address), who am I and what may I do, switch projects, sign out (the
session is recorded as signed out, its tokens dropped from Cairn's cache and revoked at
Keystone if it answers). API clients keep using X-Auth-Token; the cookie is for the browser.

These routes take no process slot (`api/gate.py`): they use no database, and every blocking
call is made on threads of its own, bounded and taken in turns: Keystone's in the door's
lanes (`api/lanes.py`; a sign-in in the lane of new clients, by client network; a signed-in
user's calls in the lane of known users), Redis's on the throttle's and the sign-out
store's. Before, a sign-in held one of the process's ten slots through up to three
Keystone calls of 15 s each: ten slow sign-ins held the API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Annotated, Literal, TypeVar

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.callers import Caller
from api.deps import NowDep, SettingsDep, get_policy, require_csrf
from api.errors import error_responses
from api.lanes import FairLane, KeystoneLanes
from services.auth.keystone import TokenValidator
from services.auth.policy import Policy
from services.auth.portal_sessions import (
    KeystoneSignIn,
    PortalSession,
    Project,
    SessionSeal,
    SignedIn,
    noauth_session,
)
from services.auth.portal_signouts import PortalSignOuts
from services.auth.sign_in_throttle import SignInThrottle
from services.context import RequestContext
from services.errors import CairnError, InvalidInput, Unauthorized
from services.formats import PROJECT
from services.settings import Settings

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/session", tags=["session"])

ROLE = r"^[A-Za-z0-9_.-]{1,64}$"
SIGN_IN_SECONDS = 30.0
"""How long a sign-in waits for its turn and its Keystone calls (up to three) together."""
T = TypeVar("T")


class SignIn(BaseModel):
    domain: str = Field(default="Default", min_length=1, max_length=255,
                        description="Keystone domain of the user (auth_strategy keystone)")
    username: str | None = Field(default=None, min_length=1, max_length=255)
    password: str | None = Field(default=None, min_length=1, max_length=4096)
    project_id: str | None = Field(
        default=None, pattern=PROJECT,
        description="Project to work in: with Keystone one of the user's (the first by name "
                    "when omitted); with noauth, required")
    roles: list[Annotated[str, Field(pattern=ROLE)]] = Field(
        default_factory=lambda: ["member", "reader"], max_length=16,
        description="noauth only: the roles the session acts with")


class ProjectSwitch(BaseModel):
    project_id: str = Field(pattern=PROJECT)


class ProjectPublic(BaseModel):
    id: str
    name: str


class SessionPublic(BaseModel):
    auth_strategy: Literal["noauth", "keystone"]
    user_name: str
    project_id: str
    projects: list[ProjectPublic] = Field(
        description="Projects the user may switch to (Keystone); empty with noauth")
    roles: list[str]
    cloud_admin: bool
    allowed: list[str] = Field(
        description="The policy actions this session may take (`plan:create`, ...): the "
                    "portal hides what the user may not do; the API still decides")
    csrf_token: str = Field(
        description="Send it as X-CSRF-Token with every change made with the session cookie")
    expires_at: datetime


class SignedOut(BaseModel):
    tokens_revoked: bool = Field(
        description="Keystone revoked the session's tokens (always true with noauth). When "
                    "false they stay valid at Keystone until they expire, though Cairn no "
                    "longer accepts this session")
    ended_everywhere: bool = Field(
        description="Every Cairn process refuses this session from now on (false when "
                    "Cairn's Redis could not record the sign-out)")
    message: str


class SignInOptions(BaseModel):
    auth_strategy: Literal["noauth", "keystone"] = Field(
        description="keystone: sign in with domain, user name and password; noauth: name "
                    "the project")


def _seal(request: Request) -> SessionSeal:
    seal: SessionSeal = request.app.state.portal_seal
    return seal


def _keystone(settings: Settings) -> KeystoneSignIn | None:
    if settings.auth_strategy != "keystone":
        return None
    assert settings.keystone is not None  # the settings validator requires it
    return KeystoneSignIn(settings.keystone.auth_url)


def _cookie(request: Request) -> str:
    name: str = request.app.state.portal_cookie
    return name


def _caller(request: Request) -> Caller:
    caller: Caller = request.state.caller  # the door always says who called
    return caller


def current(request: Request, *, signing_out: bool = False) -> PortalSession:
    """The request's session, as the door opened it: sealed under the deployment's keys,
    unexpired, and not signed out. Signing out needs nothing more; anything else needs its
    token to be usable too."""
    caller = _caller(request)
    if caller.session_error is not None:
        raise caller.session_error
    if caller.session is None:
        raise Unauthorized("you are not signed in, or your session has ended; sign in again")
    if caller.error is not None and not signing_out:
        raise caller.error
    return caller.session


def _lanes(request: Request) -> KeystoneLanes:
    lanes: KeystoneLanes = request.app.state.keystone_lanes
    return lanes


def _user(session: PortalSession) -> str:
    """Whose turn a signed-in user's Keystone calls take in the lane of known users."""
    return f"{session.project_id}/{session.user_name}"


async def _keystone_call(lane: FairLane, client: str, call: Callable[[], T], what: str,
                         timeout: float | None = None) -> T:
    return await lane.run(client, call, what=f"Keystone, asked to {what},", timeout=timeout)


def _trusted(request: Request, signed: SignedIn) -> RequestContext:
    """The caller a session Keystone has just issued stands for, from Keystone's own answer
    (also cached, so the session's next request needs no check)."""
    tokens: TokenValidator = request.app.state.tokens
    assert signed.session.token is not None
    info = tokens.remember(signed.session.token, signed.issued)
    return tokens.context_of(info, signed.session.token, request.method, request.url.path)


async def _describe(request: Request, session: PortalSession, settings: Settings,
                    policy: Policy, ctx: RequestContext | None = None,
                    projects: tuple[Project, ...] | None = None) -> SessionPublic:
    keystone = _keystone(settings)
    if keystone is not None:
        assert session.unscoped is not None
        if ctx is None:
            ctx = _caller(request).context
            assert ctx is not None  # the door validated the session's token
        if projects is None:
            projects = tuple(await _keystone_call(
                _lanes(request).validated, _user(session),
                partial(keystone.projects, session.unscoped), "list your projects"))
    else:
        ctx = session.noauth_context(frozenset(settings.admin_projects))
    return SessionPublic(
        auth_strategy=settings.auth_strategy, user_name=session.user_name,
        project_id=session.project_id,
        projects=[ProjectPublic(id=p.id, name=p.name) for p in projects or ()],
        roles=sorted(ctx.roles), cloud_admin=ctx.is_admin,
        allowed=policy.allowed_actions(ctx), csrf_token=session.csrf,
        expires_at=session.expires_at)


def _set_cookie(request: Request, response: Response, session: PortalSession,
                settings: Settings, now: datetime) -> None:
    # __Host-: Secure, Path=/, no Domain (services/auth/portal_sessions.py).
    response.set_cookie(_cookie(request), _seal(request).seal(session),
                        max_age=max(0, int((session.expires_at - now).total_seconds())),
                        path="/", httponly=True, samesite="strict",
                        secure=settings.portal_cookie_secure)


def _revocable(session: PortalSession) -> list[str]:
    return [t for t in (session.token, session.unscoped) if t is not None]


async def _end(request: Request, session: PortalSession, keystone: KeystoneSignIn | None,
               now: datetime) -> tuple[bool, bool]:
    """Ends a session whatever Keystone answers, or whether it answers: its tokens dropped
    from this process's token cache, the session recorded as signed out for every process,
    then its tokens revoked at Keystone if it does so in time. Returns (tokens revoked,
    recorded everywhere)."""
    tokens: TokenValidator | None = request.app.state.tokens
    if tokens is not None:
        for token in _revocable(session):
            tokens.forget(token, "this portal session was signed out; sign in again")
    sign_outs: PortalSignOuts = request.app.state.portal_sign_outs
    recorded = await sign_outs.record(session, now)
    if keystone is None:
        return True, recorded

    def revoke_all() -> bool:
        revoked = [keystone.revoke(token) for token in _revocable(session)]  # each, always
        return all(revoked)

    try:
        revoked = await _keystone_call(_lanes(request).validated, _user(session), revoke_all,
                                       "revoke your tokens")
    except CairnError:
        revoked = False
    return revoked, recorded


PolicyDep = Annotated[Policy, Depends(get_policy)]


@router.get("/options", response_model=SignInOptions, summary="How to sign in")
async def sign_in_options(settings: SettingsDep) -> SignInOptions:
    return SignInOptions(auth_strategy=settings.auth_strategy)


@router.post("", response_model=SessionPublic,
             responses=error_responses(401, 403, 422, 429, 503),
             summary="Sign in to the portal")
async def sign_in(body: SignIn, request: Request, response: Response, settings: SettingsDep,
                  policy: PolicyDep, now: NowDep) -> SessionPublic:
    """With Keystone: the user's domain, name and password (and optionally the project);
    with noauth: the project. The answer sets the session cookie (`__Host-cairn_session`:
    HttpOnly, Secure, SameSite=Strict) and gives the CSRF token that changes must carry.
    A client address may try `portal_sign_in_attempts_per_minute` times a minute, and fail
    `portal_sign_in_failures` times a user within the failure window (429 beyond)."""
    keystone = _keystone(settings)
    throttle: SignInThrottle = request.app.state.sign_in_throttle
    client = _caller(request).network
    user = f"{body.domain}/{body.username or body.project_id or ''}"
    await throttle.attempt(client, user)
    try:
        if keystone is not None:
            if not body.username or not body.password:
                raise InvalidInput("sign in with your user name and password", field="username")
            signed = await _keystone_call(
                _lanes(request).unknown, client,
                partial(keystone.sign_in, body.domain, body.username, body.password,
                        body.project_id), "sign you in", timeout=SIGN_IN_SECONDS)
            described = await _describe(request, signed.session, settings, policy,
                                        _trusted(request, signed), signed.projects)
        else:
            if body.project_id is None:
                raise InvalidInput("with auth_strategy noauth, name the project to work in",
                                   field="project_id")
            signed = SignedIn(noauth_session(body.project_id, tuple(body.roles), now), {})
            described = await _describe(request, signed.session, settings, policy)
    except Unauthorized:
        raise  # a failed guess: it stays counted
    except BaseException:
        await throttle.settle(client, user)
        raise
    await throttle.settle(client, user)
    _set_cookie(request, response, signed.session, settings, now)
    return described


@router.get("", response_model=SessionPublic, responses=error_responses(401, 503),
            summary="The signed-in user, their project, roles and allowed actions")
async def get_session(request: Request, settings: SettingsDep,
                      policy: PolicyDep) -> SessionPublic:
    return await _describe(request, current(request), settings, policy)


@router.put("/project", response_model=SessionPublic,
            responses=error_responses(401, 403, 422, 503),
            summary="Switch the session to another of the user's projects")
async def switch_project(body: ProjectSwitch, request: Request, response: Response,
                         settings: SettingsDep, policy: PolicyDep,
                         now: NowDep) -> SessionPublic:
    session = current(request)
    require_csrf(request, session)
    keystone = _keystone(settings)
    if keystone is not None:
        assert session.unscoped is not None
        assert session.token is not None
        lane = _lanes(request).validated
        switched = await _keystone_call(
            lane, _user(session),
            partial(keystone.scope, session.unscoped, body.project_id, session.user_name),
            "switch projects")
        ctx: RequestContext | None = _trusted(request, switched)
        # The old session (its cookie, its project-scoped token) ends; the unscoped token
        # goes on in the new one, and the old token is revoked when Keystone gets to it.
        tokens: TokenValidator = request.app.state.tokens
        tokens.forget(session.token, "this portal session switched projects; sign in again")
        sign_outs: PortalSignOuts = request.app.state.portal_sign_outs
        await sign_outs.record(session, now)
        try:
            revoking = lane.submit(_user(session), partial(keystone.revoke, session.token))
        except CairnError:
            log.warning("could not revoke a portal token after a project switch: this "
                        "user's Keystone calls are queued already")
        else:
            revoking.add_done_callback(_outcome_seen)
    else:
        switched = SignedIn(noauth_session(body.project_id, session.roles, now), {})
        ctx = None
    described = await _describe(request, switched.session, settings, policy, ctx)
    _set_cookie(request, response, switched.session, settings, now)
    return described


def _outcome_seen(done: asyncio.Future[bool]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.warning("could not revoke a portal token after a project switch: %s",
                    done.exception())


@router.delete("", response_model=SignedOut, responses=error_responses(401, 403),
               summary="Sign out: the session ends, and its Keystone tokens are revoked")
async def sign_out(request: Request, settings: SettingsDep, now: NowDep) -> JSONResponse:
    """The session ends whatever Keystone answers: Cairn drops its tokens from its cache and
    refuses the session (a copy of the cookie too) on every process. The answer says
    whether Keystone revoked the tokens; when it did not, they stay valid at Keystone (for
    other clients that hold them) until they expire."""
    session = current(request, signing_out=True)
    require_csrf(request, session)
    revoked, recorded = await _end(request, session, _keystone(settings), now)
    if revoked and recorded:
        message = "signed out; the session's Keystone tokens are revoked"
    elif recorded:
        message = ("signed out of Cairn, which no longer accepts this session; Keystone did "
                   "not revoke its tokens (it could not be reached, or refused), so they stay "
                   f"valid at Keystone until {session.expires_at.isoformat()}")
    else:
        message = ("signed out here, but Cairn could not record the sign-out for its other "
                   "processes (its Redis is unreachable)"
                   + ("" if revoked else " and Keystone did not revoke the session's tokens")
                   + f": a copy of this session may work until {session.expires_at.isoformat()}"
                   "; sign out again in a minute")
    body = SignedOut(tokens_revoked=revoked, ended_everywhere=recorded, message=message)
    response = JSONResponse(body.model_dump())
    response.delete_cookie(_cookie(request), path="/", httponly=True, samesite="strict",
                           secure=settings.portal_cookie_secure)
    return response
