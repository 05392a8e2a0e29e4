"""`GET /v1/volumes?name=demo`: the project's volumes of exactly that Cinder name, found by
Cinder's own `name` filter (as `openstack volume show demo` finds them), so a client can
turn the name a user typed into the volume's id, or say that none or several have it."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import requests

from services.context import RequestContext
from services.db import Database
from services.openstack.cinder import CinderApi
from services.volumes.cinder_volumes import CinderVolumes
from services.volumes.protection import list_volumes

PROJECT, OTHER = "a" * 32, "b" * 32
NOW = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)


def _volume(volume_id: str, name: str, owner: str | None) -> dict[str, Any]:
    return {"id": volume_id, "name": name, "size": 1, "status": "available",
            "os-vol-tenant-attr:tenant_id": owner}


class _Cinder:
    """Stands in for keystoneauth's session before Cinder: answers /volumes/detail with the
    volumes whose name the `name` filter matches, as Cinder does."""

    def __init__(self, volumes: list[dict[str, Any]]) -> None:
        self.volumes = volumes
        self.params: list[dict[str, Any]] = []

    def request(self, path: str, method: str, **kwargs: Any) -> requests.Response:
        params = dict(kwargs.get("params") or {})
        self.params.append(params)
        found = [v for v in self.volumes if "name" not in params or v["name"] == params["name"]]
        response = requests.Response()
        response.status_code = 200
        response.raw = io.BytesIO(json.dumps({"volumes": found}).encode())
        return response


class _Gateway:
    def __init__(self, api: CinderApi) -> None:
        self.api = api

    def for_user(self, ctx: RequestContext) -> CinderApi:
        return self.api


def test_a_name_lists_the_projects_volumes_of_that_name_only(db: Database) -> None:
    cinder = _Cinder([_volume("1" * 8 + "-0000-4000-8000-" + "0" * 12, "demo", PROJECT),
                      _volume("2" * 8 + "-0000-4000-8000-" + "0" * 12, "web", PROJECT),
                      _volume("3" * 8 + "-0000-4000-8000-" + "0" * 12, "demo", OTHER)])
    gateway = _Gateway(CinderApi(cinder, {}))  # type: ignore[arg-type]
    ctx = RequestContext(project_id=PROJECT, token="t", roles=frozenset({"admin"}))
    with db.session() as session:
        named = list_volumes(session, ctx, CinderVolumes(gateway), NOW,  # type: ignore[arg-type]
                             limit=100, marker=None, name="demo")
        every = list_volumes(session, ctx, CinderVolumes(gateway), NOW,  # type: ignore[arg-type]
                             limit=100, marker=None)
    assert cinder.params[0]["name"] == "demo"
    # Another project's "demo", which Cinder shows a project's admin, is not the caller's.
    assert [(v.name, v.id[:1]) for v in named.volumes] == [("demo", "1")]
    assert "name" not in cinder.params[1]
    assert [v.name for v in every.volumes] == ["demo", "web"]
