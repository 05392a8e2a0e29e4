"""Request-scoped dependencies: the unit of work (commits when the route returns, rolls
back when it raises; routes never commit), the caller's context, the process's resources.

The ones that never block are `async def`: FastAPI runs a plain `def` dependency on the
thread pool, a hop that costs more than the dependency itself on every request."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session

from api.callers import Caller
from services.auth.keystone import TokenValidator
from services.auth.policy import Policy
from services.auth.portal_sessions import (
    CSRF_HEADER,
    SAFE_METHODS,
    PortalSession,
    noauth_context,
)
from services.clock import Clock
from services.context import RequestContext
from services.db import Database
from services.errors import Forbidden, Unauthorized
from services.formats import PROJECT
from services.openstack.cinder_gateway import CinderGateway
from services.settings import Settings
from services.storage.ceph import CephClusters
from services.volumes.cinder_volumes import CinderVolumes
from services.volumes.rbd_volumes import RbdVolumes
from services.volumes.resolve import VolumeResolver
from services.volumes.source import VolumeSource


async def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_now(request: Request) -> datetime:
    """The time schedules, retention and locks are read against: the same clock as the
    scheduler's and the workers' (`services/clock.py`), so a test clock moves them all."""
    clock: Clock = request.app.state.clock
    return clock()


async def get_clusters(request: Request) -> CephClusters:
    clusters: CephClusters = request.app.state.clusters
    return clusters


def get_session(db: Annotated[Database, Depends(get_db)]) -> Iterator[Session]:
    with db.session() as session:
        yield session


async def get_context(
    request: Request,
    # Declared for the OpenAPI document and its bounds (422): the door (api/gate.py and
    # api/callers.py) read them, once, and decided who calls.
    x_auth_token: Annotated[str | None, Header(description="Keystone token",
                                               max_length=8192)] = None,
    x_project_id: Annotated[str | None, Header(description="Project (noauth)",
                                               pattern=PROJECT)] = None,
    x_roles: Annotated[str | None, Header(description="Comma-separated roles (noauth)",
                                          pattern=r"^[A-Za-z0-9_., -]{0,512}$")] = None,
) -> RequestContext:
    caller: Caller = request.state.caller  # the door always says who called
    validator: TokenValidator | None = request.app.state.tokens
    if caller.session_error is not None:
        raise caller.session_error
    if caller.session is not None:
        if caller.error is not None:
            raise caller.error
        require_csrf(request, caller.session)
        if validator is None:
            return caller.session.noauth_context(_admin_projects(request))
    elif caller.presented == "session":
        raise Unauthorized("your portal session has ended; sign in again")
    if validator is not None:
        # The door validated the token (or the session's) and checked its access rules
        # against this very request; Keystone is never asked from a slot.
        if caller.context is not None:
            return caller.context
        raise Unauthorized("missing X-Auth-Token header: authenticate with Keystone and "
                           "send the token (openstack token issue)")
    # auth_strategy noauth, as Cinder's: the caller says who it is.
    if not x_project_id:
        raise Unauthorized("missing X-Project-Id header: with auth_strategy noauth every "
                           "request names its project")
    if x_roles is None:
        return RequestContext(project_id=x_project_id, roles=frozenset({"member", "reader"}))
    roles = frozenset(r.strip() for r in x_roles.split(",") if r.strip())
    return noauth_context(x_project_id, roles, _admin_projects(request))


def _admin_projects(request: Request) -> frozenset[str]:
    settings: Settings = request.app.state.settings
    return frozenset(settings.admin_projects)


def require_csrf(request: Request, session: PortalSession) -> None:
    """A change made with the session cookie must carry the session's CSRF token: a page of
    another site can make the browser send the cookie, but cannot read the token."""
    if request.method in SAFE_METHODS:
        return
    if not session.csrf_matches(request.headers.get(CSRF_HEADER)):
        raise Forbidden(f"a change made with the portal's session needs its {CSRF_HEADER} "
                        "header (GET /v1/session gives it); reload the portal")


async def get_policy(request: Request) -> Policy:
    policy: Policy = request.app.state.policy
    return policy


async def get_cinder(request: Request) -> CinderGateway | None:
    """Cinder for this request: one budget of calls, however many volumes it names."""
    cinder: CinderGateway | None = request.app.state.cinder
    return cinder.for_request() if cinder is not None else None


async def get_volume_source(
        request: Request,
        cinder: Annotated[CinderGateway | None, Depends(get_cinder)]) -> VolumeSource:
    """Which volumes there are: Cinder's when Cairn has Cinder, else the RBD images of the
    volume pools. The one place that asks."""
    if cinder is not None:
        return CinderVolumes(cinder)
    settings: Settings = request.app.state.settings
    return RbdVolumes(request.app.state.clusters, settings.volume_pools)


async def get_volume_resolver(
        request: Request,
        cinder: Annotated[CinderGateway | None, Depends(get_cinder)]) -> VolumeResolver:
    return VolumeResolver(request.app.state.clusters, cinder)


# "function": the unit of work commits when the route returns, before the answer is sent;
# with the default scope a client could read a 202 (and ask for its job) before the commit,
# or get a 202 for work whose commit then failed.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
DatabaseDep = Annotated[Database, Depends(get_db)]
VolumesDep = Annotated[VolumeResolver, Depends(get_volume_resolver)]
ContextDep = Annotated[RequestContext, Depends(get_context)]
CinderDep = Annotated[CinderGateway | None, Depends(get_cinder)]
PolicyDep = Annotated[Policy, Depends(get_policy)]
VolumeSourceDep = Annotated[VolumeSource, Depends(get_volume_source)]


def allowed(action: str, *, project_param: str | None = None) -> Any:
    """`ctx: Annotated[RequestContext, allowed("plan:create")]`: the caller, once the policy
    lets them do `action` (403 otherwise, 401 before that without valid credentials).
    `project_param` names the path parameter holding the project the request acts on (the
    policy's `%(project_id)s`) when that is not the caller's own."""

    async def check(request: Request, ctx: ContextDep,
                    policy: Annotated[Policy, Depends(get_policy)]) -> RequestContext:
        project = None if project_param is None else str(request.path_params[project_param])
        policy.enforce(action, ctx, project)
        return ctx

    return Depends(check)
SettingsDep = Annotated[Settings, Depends(get_settings)]
NowDep = Annotated[datetime, Depends(get_now)]
ClustersDep = Annotated[CephClusters, Depends(get_clusters)]
