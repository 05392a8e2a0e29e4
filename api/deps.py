"""Request-scoped dependencies: the unit of work (commits when the route returns, rolls
back when it raises; routes never commit), the caller's context, the process's resources."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.db import Database
from services.errors import Unauthorized
from services.settings import Settings
from services.storage.ceph import CephClusters


def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_clusters(request: Request) -> CephClusters:
    clusters: CephClusters = request.app.state.clusters
    return clusters


def get_session(db: Annotated[Database, Depends(get_db)]) -> Iterator[Session]:
    with db.session() as session:
        yield session


def get_context(
    x_project_id: Annotated[str | None, Header(description="Project (noauth)")] = None,
    x_roles: Annotated[str | None, Header(description="Comma-separated roles (noauth)")] = None,
) -> RequestContext:
    # auth_strategy noauth, as Cinder's: the caller says who it is.
    if not x_project_id:
        raise Unauthorized("missing X-Project-Id header: with auth_strategy noauth every "
                           "request names its project")
    roles = frozenset(r.strip() for r in (x_roles or "").split(",") if r.strip())
    return RequestContext(project_id=x_project_id, roles=roles)


SessionDep = Annotated[Session, Depends(get_session)]
ContextDep = Annotated[RequestContext, Depends(get_context)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
ClustersDep = Annotated[CephClusters, Depends(get_clusters)]
