"""Cairn's API as methods, one group per resource: `Client(http).plans.update(id, ...)`.

Each method is one route (or a route's pages followed to the end, where it says so) and
answers the API's JSON as it came, so a caller prints exactly what Cairn said (`-f json`).
The `cairn` CLI and an `openstack` client plugin both call Cairn only through here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypedDict

import requests

from cairnclient.http import ApiError, Http

JSON = dict[str, Any]
Rows = list[JSON]
Names = list[str]
Kind = Literal["full", "incremental"]
RestoreMode = Literal["copy", "instant"]

UUID = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
PAGE = 1000
"""The largest page every list route gives."""


class Qos(TypedDict, total=False):
    """A job's limits: bytes/s (at least 1 MiB/s) and read operations/s."""

    qos_bytes_per_second: int | None
    qos_ops_per_second: int | None


class PlanFields(TypedDict, total=False):
    """A plan's fields as `POST /v1/plans` takes them, and `PATCH` (each one given
    replaces the plan's; `None` clears the ones that may be empty)."""

    name: str
    description: str | None
    volumes: list[str]
    cinder_group: str | None
    rules: list[JSON]
    timezone: str
    window: JSON | None
    retention: JSON
    verify: JSON
    qos_bytes_per_second: int | None
    qos_ops_per_second: int | None
    target: str
    consistency: Literal["volume", "group"]
    offsite: JSON | None
    enabled: bool


def qos_fields(bytes_per_second: int | None, ops_per_second: int | None) -> Qos:
    """The limits given (the API's default for the others)."""
    qos: Qos = {}
    if bytes_per_second is not None:
        qos["qos_bytes_per_second"] = bytes_per_second
    if ops_per_second is not None:
        qos["qos_ops_per_second"] = ops_per_second
    return qos


class _Resource:
    def __init__(self, http: Http) -> None:
        self.http = http

    def _call(self, method: str, path: str, *, json: Any = None,
              params: dict[str, Any] | None = None) -> JSON:
        answer: JSON = self.http.call(method, path, json=json, params=params)
        return answer

    def _pages(self, path: str, key: str, params: dict[str, Any],
               limit: int | None = None) -> Rows:
        """Follow `next_marker` until the last page, or until `limit` rows."""
        rows: Rows = []
        params = {**params, "limit": min(limit or PAGE, PAGE)}
        while True:
            data = self.http.call("GET", path, params=params)
            rows.extend(data[key])
            if not data.get("next_marker") or (limit is not None and len(rows) >= limit):
                return rows[:limit] if limit is not None else rows
            params["marker"] = data["next_marker"]
            if limit is not None:
                params["limit"] = min(limit - len(rows), PAGE)


class Volumes(_Resource):
    def list(self, *, unprotected: bool = False, name: str | None = None) -> Rows:
        """The project's Cinder volumes, every page."""
        return self._pages("/v1/volumes", "volumes",
                           {"unprotected": unprotected or None, "name": name})

    def get(self, volume_id: str) -> JSON:
        return self._call("GET", f"/v1/volumes/{volume_id}")

    def resolve(self, text: str) -> str:
        """What a user typed for a volume, as the API takes it: a Cinder id or an RBD image
        `cluster/pool/image` as it is; else a Cinder volume's name, looked up in the
        project's volumes as `openstack volume show NAME` does. No volume of that name is
        404, several are 409 naming their ids."""
        if UUID.match(text) or "/" in text:
            return text
        found = self.list(name=text)
        if not found:
            raise ApiError(f"no volume named {text!r} in your project (give its id, or see "
                           "the volume list)", 404, "volume_not_found")
        if len(found) > 1:
            ids = ", ".join(str(v["id"]) for v in found)
            raise ApiError(f"{len(found)} volumes are named {text!r}: give the id of the "
                           f"one you mean ({ids})", 409, "volume_name_ambiguous")
        return str(found[0]["id"])

    def file_versions(self, volume_id: str, path: str, *, partition: int | None = None,
                      limit: int = 30) -> JSON:
        return self._call("GET", f"/v1/volumes/{volume_id}/file-versions",
                          params={"path": path, "partition": partition, "limit": limit})


class Plans(_Resource):
    def list(self) -> Rows:
        return self._pages("/v1/plans", "plans", {})

    def get(self, plan_id: str) -> JSON:
        return self._call("GET", f"/v1/plans/{plan_id}")

    def create(self, fields: PlanFields) -> JSON:
        return self._call("POST", "/v1/plans", json=fields)

    def update(self, plan_id: str, changes: PlanFields) -> JSON:
        return self._call("PATCH", f"/v1/plans/{plan_id}", json=changes)

    def delete(self, plan_id: str) -> None:
        self.http.call("DELETE", f"/v1/plans/{plan_id}")

    def pause(self, plan_id: str) -> JSON:
        return self._call("POST", f"/v1/plans/{plan_id}/pause")

    def resume(self, plan_id: str) -> JSON:
        return self._call("POST", f"/v1/plans/{plan_id}/resume")

    def run(self, plan_id: str, *, kind: Kind | None = None) -> JSON:
        """One backup of each of the plan's volumes now: `jobs` and `skipped`."""
        return self._call("POST", f"/v1/plans/{plan_id}/run",
                          json={} if kind is None else {"kind": kind})

    def next_runs(self, plan_id: str, *, count: int = 10, after: str | None = None) -> JSON:
        return self._call("GET", f"/v1/plans/{plan_id}/next-runs",
                          params={"count": count, "after": after})

    def retention_preview(self, plan_id: str) -> JSON:
        """Each available restore point of the plan: kept (by which rules) or pruned."""
        return self._call("GET", f"/v1/plans/{plan_id}/retention-preview")

    def preview(self, draft: JSON) -> JSON:
        """What a plan being written would do (`POST /v1/plans/preview`); stores nothing."""
        return self._call("POST", "/v1/plans/preview", json=draft)


class Backups(_Resource):
    def create(self, volume: str, *, kind: Kind = "incremental", target: str | None = None,
               qos: Qos | None = None) -> JSON:
        """Queue a backup; answers its job."""
        body: JSON = {"volume": volume, "kind": kind, **(qos or {})}
        if target is not None:
            body["target"] = target
        return self._call("POST", "/v1/backups", json=body)


class RestorePoints(_Resource):
    def list(self, *, volume: str | None = None, plan_id: str | None = None,
             limit: int | None = PAGE) -> Rows:
        """Newest first, `limit` of them (None: every page)."""
        return self._pages("/v1/restore-points", "restore_points",
                           {"volume": volume, "plan_id": plan_id}, limit)

    def get(self, rp_id: str) -> JSON:
        return self._call("GET", f"/v1/restore-points/{rp_id}")

    def days(self, volume: str, *, timezone: str = "UTC", days: int = 90) -> JSON:
        return self._call("GET", "/v1/restore-points/days",
                          params={"volume": volume, "timezone": timezone, "days": days})

    def delete(self, rp_id: str) -> JSON:
        return self._call("DELETE", f"/v1/restore-points/{rp_id}")

    def lock(self, rp_id: str, until: str | None) -> JSON:
        """Keep it from retention and deletion until `until` (None unlocks)."""
        return self._call("PATCH", f"/v1/restore-points/{rp_id}", json={"locked_until": until})

    def verify(self, rp_id: str, *, sample_fraction: float | None = None,
               qos: Qos | None = None) -> JSON:
        body: JSON = {**(qos or {})}
        if sample_fraction is not None:
            body["sample_fraction"] = sample_fraction
        return self._call("POST", f"/v1/restore-points/{rp_id}/verify", json=body)

    def copy(self, rp_id: str, *, target: str | None = None, qos: Qos | None = None) -> JSON:
        body: JSON = {**(qos or {})}
        if target is not None:
            body["target"] = target
        return self._call("POST", f"/v1/restore-points/{rp_id}/copy", json=body)

    def restore(self, rp_id: str, *, new_volume: JSON | None = None,
                volume_id: str | None = None, target: str | None = None,
                mode: RestoreMode = "copy", qos: Qos | None = None) -> JSON:
        """Into a new Cinder volume (`new_volume`: name, size_gb, volume_type,
        description), in place over `volume_id`, or into a new RBD image `target`."""
        body: JSON = {"mode": mode, **(qos or {})}
        for key, value in (("new_volume", new_volume), ("volume_id", volume_id),
                           ("target", target)):
            if value is not None:
                body[key] = value
        return self._call("POST", f"/v1/restore-points/{rp_id}/restore", json=body)


class RestorePointGroups(_Resource):
    def list(self, *, plan_id: str | None = None, limit: int = PAGE) -> Rows:
        """The groups among the newest `limit` restore points (the API has no list of
        groups: they are found through their members' `group_id`), newest first, each with
        its members."""
        groups: dict[str, JSON] = {}
        for rp in RestorePoints(self.http).list(plan_id=plan_id, limit=limit):
            if rp.get("group_id"):
                group = groups.setdefault(rp["group_id"], {
                    "id": rp["group_id"], "plan_id": rp.get("plan_id"),
                    "created_at": rp.get("created_at"), "restore_points": []})
                group["restore_points"].append(rp)
        for group in groups.values():
            group["complete"] = all(m["status"] == "available"
                                    for m in group["restore_points"])
        return list(groups.values())

    def get(self, group_id: str) -> JSON:
        return self._call("GET", f"/v1/restore-point-groups/{group_id}")

    def restore(self, group_id: str, *, name_prefix: str | None = None,
                target_prefix: str | None = None, in_place: bool = False,
                mode: RestoreMode = "copy", qos: Qos | None = None) -> JSON:
        """Every member at once, all or none: `jobs`."""
        body: JSON = {"in_place": in_place, "mode": mode, **(qos or {})}
        if name_prefix is not None:
            body["name_prefix"] = name_prefix
        if target_prefix is not None:
            body["target_prefix"] = target_prefix
        return self._call("POST", f"/v1/restore-point-groups/{group_id}/restore", json=body)


class Files(_Resource):
    """The files inside a restore point, read in place."""

    def partitions(self, rp_id: str) -> JSON:
        return self._call("GET", f"/v1/restore-points/{rp_id}/partitions")

    def list(self, rp_id: str, path: str, *, partition: int | None = None, limit: int = 100,
             marker: str | None = None) -> JSON:
        """One page of a directory's entries (`next_marker` for the next)."""
        return self._call("GET", f"/v1/restore-points/{rp_id}/files",
                          params={"path": path, "partition": partition, "limit": limit,
                                  "marker": marker})

    def stat(self, rp_id: str, path: str, *, partition: int | None = None) -> JSON:
        return self._call("GET", f"/v1/restore-points/{rp_id}/files/stat",
                          params={"path": path, "partition": partition})

    def search(self, rp_id: str, pattern: str, *, path: str = "/",
               partition: int | None = None, limit: int = 100) -> JSON:
        return self._call("GET", f"/v1/restore-points/{rp_id}/files/search",
                          params={"pattern": pattern, "path": path, "partition": partition,
                                  "limit": limit})

    @contextmanager
    def content(self, rp_id: str, path: str, *,
                partition: int | None = None) -> Iterator[requests.Response]:
        """A file's bytes, streamed."""
        with self.http.stream(f"/v1/restore-points/{rp_id}/files/content",
                              params={"path": path, "partition": partition}) as response:
            yield response

    @contextmanager
    def archive(self, rp_id: str, paths: Names, *, fmt: Literal["tar", "zip"],
                partition: int | None = None) -> Iterator[requests.Response]:
        """Directories and files as one archive, streamed as it is made."""
        with self.http.stream(f"/v1/restore-points/{rp_id}/files/archive", params={
                "path": paths, "partition": partition, "format": fmt}) as response:
            yield response


class Jobs(_Resource):
    def list(self, *, plan_id: str | None = None, volume: str | None = None,
             kind: str | None = None, status: str | None = None, since: str | None = None,
             until: str | None = None, limit: int = 50) -> Rows:
        """Newest first, `limit` of them."""
        return self._pages("/v1/jobs", "jobs", {
            "plan_id": plan_id, "volume": volume, "kind": kind, "status": status,
            "since": since, "until": until}, limit)

    def get(self, job_id: str) -> JSON:
        return self._call("GET", f"/v1/jobs/{job_id}")

    def update_qos(self, job_id: str, qos: Qos) -> JSON:
        """New limits for a queued or running job (a running copy follows within a
        second); a limit given as None is removed."""
        return self._call("PATCH", f"/v1/jobs/{job_id}", json=qos)

    def cancel(self, job_id: str) -> JSON:
        return self._call("POST", f"/v1/jobs/{job_id}/cancel")


class Webhooks(_Resource):
    def list(self) -> Rows:
        found: Rows = self._call("GET", "/v1/webhooks")["webhooks"]
        return found

    def get(self, webhook_id: str) -> JSON:
        return self._call("GET", f"/v1/webhooks/{webhook_id}")

    def create(self, url: str, *, event_types: Names | None = None,
               description: str | None = None) -> JSON:
        """The answer holds the signing secret, shown this once."""
        return self._call("POST", "/v1/webhooks", json={
            "url": url, "event_types": event_types or [], "description": description})

    def update(self, webhook_id: str, *, url: str | None = None,
               event_types: Names | None = None, enabled: bool | None = None,
               description: str | None = None) -> JSON:
        change = {"url": url, "event_types": event_types, "enabled": enabled,
                  "description": description}
        return self._call("PATCH", f"/v1/webhooks/{webhook_id}",
                          json={k: v for k, v in change.items() if v is not None})

    def delete(self, webhook_id: str) -> None:
        self.http.call("DELETE", f"/v1/webhooks/{webhook_id}")

    def rotate_secret(self, webhook_id: str) -> JSON:
        return self._call("POST", f"/v1/webhooks/{webhook_id}/rotate-secret")

    def test(self, webhook_id: str) -> JSON:
        return self._call("POST", f"/v1/webhooks/{webhook_id}/test")

    def deliveries(self, webhook_id: str, *, limit: int = 20) -> JSON:
        return self._call("GET", f"/v1/webhooks/{webhook_id}/deliveries",
                          params={"limit": limit})


class Quotas(_Resource):
    def usage(self) -> JSON:
        """The caller's project: its limits and what it uses."""
        return self._call("GET", "/v1/usage")

    def get(self, project_id: str) -> JSON:
        """Any project's (administrators)."""
        return self._call("GET", f"/v1/quotas/{project_id}")

    def set(self, project_id: str, *, restore_points: int | None,
            gigabytes: float | None) -> JSON:
        """Both limits as they will be (None: no limit) (administrators)."""
        return self._call("PUT", f"/v1/quotas/{project_id}", json={
            "restore_points": restore_points, "gigabytes": gigabytes})


class Client(_Resource):
    """Every resource of Cairn's API over one `Http`."""

    def __init__(self, http: Http) -> None:
        super().__init__(http)
        self.volumes = Volumes(http)
        self.plans = Plans(http)
        self.backups = Backups(http)
        self.restore_points = RestorePoints(http)
        self.restore_point_groups = RestorePointGroups(http)
        self.files = Files(http)
        self.jobs = Jobs(http)
        self.webhooks = Webhooks(http)
        self.quotas = Quotas(http)

    def targets(self) -> Rows:
        """The backup targets a plan or backup may name."""
        found: Rows = self._call("GET", "/v1/targets")["targets"]
        return found

    def overview(self) -> JSON:
        """The project's protection at a glance."""
        return self._call("GET", "/v1/overview")

    def orphans(self, *, grace_seconds: float | None = None) -> JSON:
        """What the orphan reconciler would remove or flag now (administrators)."""
        return self._call("GET", "/v1/orphans", params={"grace_seconds": grace_seconds})
