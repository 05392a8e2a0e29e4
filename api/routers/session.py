"""The portal's session: sign in (the tokens stay in a sealed HttpOnly cookie), who am I and
what may I do, switch projects, sign out (the tokens are revoked). API clients keep using
X-Auth-Token; the cookie is for the browser."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from api.deps import NowDep, SettingsDep, get_policy, require_csrf
from api.errors import error_responses
from services.auth.policy import Policy
from services.auth.portal_sessions import (
    COOKIE,
    KeystoneSignIn,
    PortalSession,
    Project,
    SessionSeal,
    noauth_session,
)
from services.context import RequestContext
from services.errors import InvalidInput, Unauthorized
from services.formats import PROJECT
from services.settings import Settings

router = APIRouter(prefix="/v1/session", tags=["session"])

ROLE = r"^[A-Za-z0-9_.-]{1,64}$"


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


def current(request: Request, now: datetime) -> PortalSession:
    value = request.cookies.get(COOKIE)
    session = None if value is None else _seal(request).open(value, now)
    if session is None:
        raise Unauthorized("you are not signed in, or your session has ended; sign in again")
    return session


async def _describe(request: Request, session: PortalSession, settings: Settings,
                    policy: Policy) -> SessionPublic:
    keystone = _keystone(settings)
    projects: list[Project] = []
    if keystone is not None:
        assert session.token is not None
        assert session.unscoped is not None
        ctx: RequestContext = await run_in_threadpool(request.app.state.tokens.context_for,
                                                      session.token, request.method,
                                                      request.url.path)
        projects = await run_in_threadpool(keystone.projects, session.unscoped)
    else:
        ctx = session.noauth_context(frozenset(settings.admin_projects))
    return SessionPublic(
        auth_strategy=settings.auth_strategy, user_name=session.user_name,
        project_id=session.project_id,
        projects=[ProjectPublic(id=p.id, name=p.name) for p in projects],
        roles=sorted(ctx.roles), cloud_admin=ctx.is_admin,
        allowed=policy.allowed_actions(ctx), csrf_token=session.csrf,
        expires_at=session.expires_at)


def _set_cookie(request: Request, response: Response, session: PortalSession,
                settings: Settings, now: datetime) -> None:
    secure = settings.portal_cookie_secure
    if secure is None:
        secure = (request.url.scheme == "https"
                  or request.headers.get("x-forwarded-proto") == "https")
    response.set_cookie(COOKIE, _seal(request).seal(session),
                        max_age=max(0, int((session.expires_at - now).total_seconds())),
                        path="/", httponly=True, samesite="strict", secure=secure)


PolicyDep = Annotated[Policy, Depends(get_policy)]


@router.get("/options", response_model=SignInOptions, summary="How to sign in")
async def sign_in_options(settings: SettingsDep) -> SignInOptions:
    return SignInOptions(auth_strategy=settings.auth_strategy)


@router.post("", response_model=SessionPublic, responses=error_responses(401, 403, 422, 503),
             summary="Sign in to the portal")
async def sign_in(body: SignIn, request: Request, response: Response, settings: SettingsDep,
                  policy: PolicyDep, now: NowDep) -> SessionPublic:
    """With Keystone: the user's domain, name and password (and optionally the project);
    with noauth: the project. The answer sets the session cookie (HttpOnly,
    SameSite=Strict) and gives the CSRF token that changes must carry."""
    keystone = _keystone(settings)
    if keystone is not None:
        if not body.username or not body.password:
            raise InvalidInput("sign in with your user name and password", field="username")
        session = await run_in_threadpool(keystone.sign_in, body.domain, body.username,
                                          body.password, body.project_id)
    else:
        if body.project_id is None:
            raise InvalidInput("with auth_strategy noauth, name the project to work in",
                               field="project_id")
        session = noauth_session(body.project_id, tuple(body.roles), now)
    described = await _describe(request, session, settings, policy)
    _set_cookie(request, response, session, settings, now)
    return described


@router.get("", response_model=SessionPublic, responses=error_responses(401, 503),
            summary="The signed-in user, their project, roles and allowed actions")
async def get_session(request: Request, settings: SettingsDep, policy: PolicyDep,
                      now: NowDep) -> SessionPublic:
    return await _describe(request, current(request, now), settings, policy)


@router.put("/project", response_model=SessionPublic,
            responses=error_responses(401, 403, 422, 503),
            summary="Switch the session to another of the user's projects")
async def switch_project(body: ProjectSwitch, request: Request, response: Response,
                         settings: SettingsDep, policy: PolicyDep,
                         now: NowDep) -> SessionPublic:
    session = current(request, now)
    require_csrf(request, session)
    keystone = _keystone(settings)
    if keystone is not None:
        assert session.unscoped is not None
        assert session.token is not None
        switched = await run_in_threadpool(keystone.scope, session.unscoped, body.project_id,
                                           session.user_name)
        await run_in_threadpool(keystone.revoke, session.token)
    else:
        switched = noauth_session(body.project_id, session.roles, now)
    described = await _describe(request, switched, settings, policy)
    _set_cookie(request, response, switched, settings, now)
    return described


@router.delete("", status_code=204, responses=error_responses(401, 403),
               summary="Sign out: the session's Keystone tokens are revoked")
async def sign_out(request: Request, settings: SettingsDep, now: NowDep) -> Response:
    session = current(request, now)
    require_csrf(request, session)
    keystone = _keystone(settings)
    if keystone is not None:
        for token in (session.token, session.unscoped):
            if token is not None:
                await run_in_threadpool(keystone.revoke, token)
    response = Response(status_code=204)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
