"""Cinder's block-storage API as Cairn calls it (`CinderApi`), through a keystoneauth1
session: volumes, groups and volume types, each answer or refusal turned into Cairn's own
(a volume the caller may not see is not found). Whose session it is, the caller's or
Cairn's service user's, is the gateway's choice (`cinder_gateway.py`); what one request
may spend on Cinder, `call_budget.py`."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session

from services.errors import (
    CairnError,
    CinderError,
    Forbidden,
    InvalidInput,
    QuotaExceeded,
    ServiceUnavailable,
    VolumeNotFound,
)
from services.openstack.call_budget import CallBudget

log = logging.getLogger(__name__)

VOLUME_SERVICE_TYPES = ("volumev3", "block-storage", "volume")
MICROVERSION = {"OpenStack-API-Version": "volume 3.8"}
"""Where Cinder has `manageable_volumes` and filters volume lists by metadata."""
GROUPS_MICROVERSION = {"OpenStack-API-Version": "volume 3.58"}
"""Where a generic volume group's `show` lists its volumes (`list_volume`, 3.25) and names
its project to administrators (3.58, Cinder 15.0 Train)."""
GROUP_PAGE = 1000
"""Volumes asked for per page when listing a group's (Cinder's own default cap)."""
TYPES_PAGE = 1000
"""Volume types asked for per page (Cinder's own default cap, `osapi_max_limit`)."""
MAX_TYPE_PAGES = 10
"""A cloud with more volume types than this many pages is not one Cairn looks through."""


@dataclass(frozen=True)
class CinderVolume:
    id: str
    name: str
    size_gb: int
    status: str
    attached_to: tuple[str, ...]
    """Servers the volume is attached to."""
    volume_type: str | None
    bootable: bool
    project_id: str | None
    """Only visible to administrators."""

    @classmethod
    def of(cls, body: dict[str, Any]) -> CinderVolume:
        return cls(
            id=body["id"], name=body.get("name") or "", size_gb=int(body["size"]),
            status=body["status"],
            attached_to=tuple(a.get("server_id") or "?" for a in body.get("attachments", [])),
            volume_type=body.get("volume_type"),
            bootable=str(body.get("bootable", "false")).lower() == "true",
            project_id=body.get("os-vol-tenant-attr:tenant_id"))


@dataclass(frozen=True)
class CinderGroup:
    id: str
    project_id: str | None
    """Only visible to administrators."""
    volume_ids: tuple[str, ...]
    """Sorted."""


def volume_not_found(volume_id: str) -> VolumeNotFound:
    """What a volume the caller may not use answers: the same as a missing one, so nobody
    learns that another project's volume exists."""
    return VolumeNotFound(f"Cinder volume {volume_id} not found", volume=volume_id)


def group_not_found(group_id: str, field: str) -> InvalidInput:
    return InvalidInput(f"Cinder group {group_id} not found (or not yours): name a generic "
                        "volume group of your project", field=field)


DISCARD_WAIT_SECONDS = 30.0
"""How long discarding a volume made moments ago waits for Cinder to finish creating it
(Cinder refuses to delete a volume that is still `creating`)."""


class CinderApi:
    """The few Cinder calls Cairn needs, on one keystoneauth session."""

    def __init__(self, session: ks_session.Session, endpoint_filter: dict[str, Any],
                 budget: CallBudget | None = None) -> None:
        self.session = session
        self.endpoint_filter = endpoint_filter
        self.budget = budget

    def unbudgeted(self) -> CinderApi:
        """The same session outside the request's budget: for cleaning up after a request
        that failed (perhaps because it spent its budget)."""
        return CinderApi(self.session, self.endpoint_filter)

    def within(self, budget: CallBudget | None) -> CinderApi:
        """The same session, its calls counted against `budget`."""
        return CinderApi(self.session, self.endpoint_filter, budget)

    def _call(self, method: str, path: str, *, not_found: Callable[[str], CairnError]
              | None = None, **kwargs: Any) -> requests.Response:
        if self.budget is not None:
            # Within the request's time: keystoneauth's own retries of a connection that
            # failed would each take the whole timeout again.
            kwargs.update(timeout=self.budget.spend(), connect_retries=0)
        try:
            response: requests.Response = self.session.request(
                path, method, endpoint_filter=self.endpoint_filter, raise_exc=False, **kwargs)
        except ks_exc.ClientException:
            log.warning("Cinder could not be reached (%s %s)", method, path, exc_info=True)
            raise ServiceUnavailable("Cinder could not be reached; try again in a few "
                                     "seconds") from None
        if response.status_code < 400:
            return response
        message = _message(response)
        if response.status_code == 404 and not_found is not None:
            raise not_found(message)
        if response.status_code == 413:
            raise QuotaExceeded(f"Cinder refused: {message}")
        if response.status_code == 403:
            raise Forbidden(f"Cinder refused: {message}")
        if response.status_code == 401:
            # Keystone's application credentials reach Cinder only as far as their access
            # rules allow it (and not at all where Cinder cannot read the rules).
            raise Forbidden(f"Cinder did not accept the token ({message}); an application "
                            "credential with access rules needs rules for Cinder's calls too")
        if response.status_code in (400, 404):
            raise InvalidInput(f"Cinder refused: {message}")
        raise CinderError(f"Cinder answered {response.status_code}: {message}")

    def list_volumes(self) -> list[CinderVolume]:
        volumes: list[CinderVolume] = []
        marker: str | None = None
        while True:
            page, marker = self.list_page(limit=500, marker=marker)
            volumes.extend(page)
            if marker is None:
                return volumes

    def list_page(self, *, limit: int, marker: str | None, name: str | None = None
                  ) -> tuple[list[CinderVolume], str | None]:
        """One page, newest first, and the marker of the next (None on the last page);
        with `name`, only the volumes of exactly that name (Cinder's own `name` filter, the
        one `openstack volume show NAME` looks a name up with)."""
        params: dict[str, Any] = {"limit": limit, "sort": "created_at:desc"}
        if marker is not None:
            params["marker"] = marker
        if name is not None:
            params["name"] = name
        page = self._call("GET", "/volumes/detail", params=params).json()["volumes"]
        return [CinderVolume.of(v) for v in page], page[-1]["id"] if len(page) == limit \
            else None

    def get(self, volume_id: str) -> CinderVolume:
        body = self._call("GET", f"/volumes/{volume_id}",
                          not_found=lambda _: volume_not_found(volume_id)).json()
        return CinderVolume.of(body["volume"])

    def create(self, *, size_gb: int, name: str, volume_type: str | None,
               description: str, metadata: dict[str, str]) -> CinderVolume:
        spec: dict[str, Any] = {"size": size_gb, "name": name, "description": description,
                                "metadata": metadata}
        if volume_type is not None:
            spec["volume_type"] = volume_type
        body = self._call("POST", "/volumes", json={"volume": spec}).json()
        return CinderVolume.of(body["volume"])

    def manage(self, *, host: str, image: str, name: str, volume_type: str | None,
               description: str, metadata: dict[str, str],
               bootable: bool = False) -> CinderVolume:
        """Have Cinder adopt an RBD image of its pool as a new volume of the session's
        project (Cinder's RBD driver renames it `volume-<id>`). Cinder's policy
        `volume_extension:volume_manage` decides who may: administrators by default."""
        spec: dict[str, Any] = {"host": host, "ref": {"source-name": image}, "name": name,
                                "description": description, "metadata": metadata,
                                "bootable": bootable}
        if volume_type is not None:
            spec["volume_type"] = volume_type
        body = self._call("POST", "/manageable_volumes", json={"volume": spec},
                          headers=MICROVERSION).json()
        return CinderVolume.of(body["volume"])

    def find_by_metadata(self, key: str, value: str) -> CinderVolume | None:
        """The volume of the session's project whose metadata has key=value, if any. The
        match is checked here too: a Cinder that ignores the filter (an older microversion,
        a filter its resource_filters.json does not allow) lists every volume, and what
        this finds may be deleted."""
        marker: str | None = None
        while True:
            params: dict[str, Any] = {"metadata": json.dumps({key: value}), "limit": 500}
            if marker is not None:
                params["marker"] = marker
            page = self._call("GET", "/volumes/detail", params=params,
                              headers=MICROVERSION).json()["volumes"]
            for body in page:
                if (body.get("metadata") or {}).get(key) == value:
                    return CinderVolume.of(body)
            if len(page) < 500:
                return None
            marker = page[-1]["id"]

    def group(self, group_id: str, *, field: str = "cinder_group") -> CinderGroup:
        """A Cinder generic volume group and its volumes. A group the session cannot see
        (missing, or another project's) is InvalidInput on `field`."""
        body = self._call("GET", f"/groups/{group_id}", params={"list_volume": "true"},
                          headers=GROUPS_MICROVERSION,
                          not_found=lambda _: group_not_found(group_id, field)).json()["group"]
        return CinderGroup(id=body["id"], project_id=body.get("project_id"),
                           volume_ids=tuple(sorted(str(v) for v in body.get("volumes") or [])))

    def group_volumes(self, group_id: str, project_id: str) -> list[CinderVolume]:
        """The volumes of Cinder group `group_id` that are project `project_id`'s, sorted by
        id: one list of Cinder's (pages of GROUP_PAGE) however many members the group has,
        of any project, instead of a call per member. An administrator's call
        (`all_tenants`, Cairn's service user). Both filters are checked here too: a Cinder
        that ignored one would list other groups' or other projects' volumes."""
        found: list[CinderVolume] = []
        marker: str | None = None
        while True:
            params: dict[str, Any] = {"group_id": group_id, "all_tenants": 1,
                                      "project_id": project_id, "limit": GROUP_PAGE}
            if marker is not None:
                params["marker"] = marker
            page = self._call("GET", "/volumes/detail", params=params,
                              headers=GROUPS_MICROVERSION).json()["volumes"]
            found += [CinderVolume.of(body) for body in page
                      if body.get("group_id") == group_id
                      and body.get("os-vol-tenant-attr:tenant_id") == project_id]
            if len(page) < GROUP_PAGE:
                return sorted(found, key=lambda volume: volume.id)
            marker = page[-1]["id"]

    def default_volume_type_id(self) -> str:
        """The id of the volume type Cinder gives the session's project by default."""
        body = self._call("GET", "/types/default").json()
        return str(body["volume_type"]["id"])

    def volume_type_id(self, name_or_id: str, *, field: str) -> str:
        """The id of the volume type the session may use by this name or id: Cinder's own
        list for the session's token (public types, and the private types its project was
        given access to; every type for an administrator). Any other is InvalidInput on
        `field`, a missing one and one the project may not use alike."""
        marker: str | None = None
        for _ in range(MAX_TYPE_PAGES):
            params: dict[str, Any] = {"is_public": "None", "limit": TYPES_PAGE}
            if marker is not None:
                params["marker"] = marker
            page = self._call("GET", "/types", params=params).json()["volume_types"]
            for kind in page:
                if name_or_id == kind.get("name") or name_or_id.lower() == kind["id"]:
                    return str(kind["id"])
            if len(page) < TYPES_PAGE:
                break
            marker = page[-1]["id"]
        raise InvalidInput(f"{field} {name_or_id!r}: no such volume type is available to your "
                           "project (openstack volume type list shows the ones that are)",
                           field=field)

    def backend_hosts(self) -> list[str]:
        """Cinder's backend pools as `host@backend#pool` (administrators only)."""
        pools = self._call("GET", "/scheduler-stats/get_pools").json()["pools"]
        return [str(p["name"]) for p in pools]

    def action(self, volume_id: str, action: dict[str, Any]) -> None:
        self._call("POST", f"/volumes/{volume_id}/action", json=action,
                   not_found=lambda m: VolumeNotFound(f"Cinder volume {volume_id} not found"))

    def delete(self, volume_id: str) -> None:
        self._call("DELETE", f"/volumes/{volume_id}", not_found=VolumeNotFound)

    def discard(self, volume_id: str, settle_seconds: float = DISCARD_WAIT_SECONDS) -> None:
        """Delete a volume made moments ago; one already gone is fine."""
        try:
            if self.get(volume_id).status == "creating":
                self.wait_for(volume_id, "available", settle_seconds)
            self.delete(volume_id)
        except VolumeNotFound:
            pass

    def wait_for(self, volume_id: str, status: str, timeout: float) -> CinderVolume:
        """Poll until the volume has `status`; an error status or the timeout raises."""
        deadline = time.monotonic() + timeout
        delay = 0.2
        while True:
            volume = self.get(volume_id)
            if volume.status == status:
                return volume
            if volume.status.startswith("error"):
                raise CinderError(f"Cinder volume {volume_id} went to status {volume.status} "
                                  f"instead of {status}; see Cinder's logs")
            if time.monotonic() > deadline:
                raise CinderError(f"Cinder volume {volume_id} is still {volume.status} after "
                                  f"{timeout:.0f} s (waited for {status})")
            time.sleep(delay)
            delay = min(delay * 1.5, 2.0)


def _message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason
    if isinstance(body, dict):
        for value in body.values():
            if isinstance(value, dict) and "message" in value:
                return str(value["message"])
    return str(body)[:300]
