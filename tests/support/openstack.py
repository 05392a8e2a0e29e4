"""The real Keystone and Cinder the local stack runs (`make test` starts them): two test
projects with reader, member and admin users, Cinder volumes made through Cinder, and a
Cairn (API, worker, scheduler) that authenticates with that Keystone."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import rbd
import yaml

from services.openstack.cinder import CinderApi
from services.openstack.identity import IDENTITY, IdentityAdmin
from services.openstack.sessions import make_session, password_auth
from tests.support import ceph
from tests.support.stack import BIN, REDIS_PORT, Process, service_env

KEYSTONE_PORT = int(os.environ.get("CAIRN_KEYSTONE_PORT", "31000"))
KEYSTONE = f"http://127.0.0.1:{KEYSTONE_PORT}/v3"
ADMIN_PASSWORD = os.environ.get("CAIRN_OS_ADMIN_PASSWORD", "cairn-admin")
SERVICE_PASSWORD = "cairn-service"
PASSWORD = "test-password"
ADMIN_PROJECT = "cairn-test-admin"
"""Cairn's admin project in the tests (in the Default domain): its admin is the cloud's
administrator. CAIRN_ADMIN_PROJECTS names it by id (`admin_project_id`)."""
REGION = f"cairn-test-{uuid.uuid4().hex[:8]}"
"""The tests register their Cairn in a region of their own, so a `make up OPENSTACK=1`
stack's catalog entry (RegionOne) is left alone; one per test session, since the CLI
finds Cairn in the catalog and sessions side by side (pytest-xdist workers, `make soak`,
another checkout) would each point the other's CLI at their own Cairn. It goes when the
session's Cairn stops (`OpenStackCairn.stop`)."""


def keystone_up() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", KEYSTONE_PORT)) == 0


def admin() -> IdentityAdmin:
    return IdentityAdmin(make_session(password_auth(KEYSTONE, "admin", ADMIN_PASSWORD, "admin")))


@dataclass(frozen=True)
class User:
    name: str
    project: str
    project_id: str

    def token(self) -> str:
        """A fresh project-scoped token."""
        response = httpx.post(f"{KEYSTONE}/auth/tokens", json={"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": self.name, "domain": {"id": "default"}, "password": PASSWORD}}},
            "scope": {"project": {"name": self.project, "domain": {"id": "default"}}}}})
        assert response.status_code == 201, response.text
        return response.headers["X-Subject-Token"]

    def cinder(self) -> CinderApi:
        return cinder_as(self.name, PASSWORD, self.project)

    def cloud(self) -> dict[str, Any]:
        """This user's clouds.yaml entry."""
        return {"auth": {"auth_url": KEYSTONE, "username": self.name, "password": PASSWORD,
                         "project_name": self.project, "user_domain_name": "Default",
                         "project_domain_name": "Default"},
                "region_name": REGION, "interface": "public", "identity_api_version": 3}


@dataclass
class Cloud:
    """Projects A and B: A has a reader, a member and an admin; B a member and an admin.
    `n-admin` is the cloud's administrator (admin in the project whose id
    CAIRN_ADMIN_PROJECTS holds)."""

    users: dict[str, User]
    clouds_yaml: Path

    def __getitem__(self, name: str) -> User:
        return self.users[name]


KEYSTONE_LOCK = Path(tempfile.gettempdir()) / (
    f"cairn-tests-keystone-{os.environ.get('CAIRN_TEST_REDIS_DB_OFFSET', '0')}.lock")
"""One process at a time uses (or makes) the real Keystone's test projects."""


@contextmanager
def keystone_tests_alone() -> Iterator[None]:
    with KEYSTONE_LOCK.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def make_cloud(directory: Path) -> Cloud:
    with keystone_tests_alone():  # workers making the same projects at once: 409s
        return _make_cloud(directory)


def _make_cloud(directory: Path) -> Cloud:
    ident = admin()
    ident.ensure_region(REGION)
    # Cairn's service user (stack.sh makes it too): validates tokens, acts on Cinder.
    service = ident.ensure_project("service")
    cairn = ident.ensure_user("cairn", SERVICE_PASSWORD)
    for role in ("admin", "service"):
        ident.grant(cairn, service, role)
    users: dict[str, User] = {}
    for project, roles in (("cairn-test-a", ("reader", "member", "admin")),
                           ("cairn-test-b", ("member", "admin")),
                           (ADMIN_PROJECT, ("admin",))):
        project_id = ident.ensure_project(project)
        for role in roles:
            # a-reader, a-member, a-admin (project A's own admin), b-member, b-admin, and
            # n-admin: the cloud's administrator (admin in Cairn's admin project).
            name = f"{project[-1]}-{role}"
            user_id = ident.ensure_user(name, PASSWORD)
            ident.grant(user_id, project_id, role)
            users[name] = User(name, project, project_id)
    clouds_yaml = directory / "clouds.yaml"
    clouds_yaml.write_text(yaml.safe_dump(
        {"clouds": {name: user.cloud() for name, user in users.items()}}))
    return Cloud(users, clouds_yaml)


@dataclass
class OpenStackCairn:
    url: str
    env: dict[str, str]
    processes: list[Process] = field(default_factory=list)

    def call(self, method: str, path: str, token: str | None, **kwargs: Any) -> httpx.Response:
        headers = {"X-Auth-Token": token} if token else {}
        return httpx.request(method, self.url + path, headers=headers, timeout=60, **kwargs)

    def wait_job(self, job_id: str, token: str, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        job: dict[str, Any] = {}
        while time.monotonic() < deadline:
            job = self.call("GET", f"/v1/jobs/{job_id}", token).json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} still {job.get('status')}: {job}")

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()
        forget_region(REGION)


def forget_region(region: str) -> None:
    """Remove a region of the tests from the catalog, with its endpoints."""
    ident = admin()
    for endpoint in ident.session.get("/endpoints", endpoint_filter=IDENTITY,
                                      params={"region_id": region}).json()["endpoints"]:
        ident.session.delete(f"/endpoints/{endpoint['id']}", endpoint_filter=IDENTITY)
    ident.session.delete(f"/regions/{region}", endpoint_filter=IDENTITY, raise_exc=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def admin_project_id() -> str:
    """The id of Cairn's admin project in the tests: what CAIRN_ADMIN_PROJECTS holds."""
    return admin().ensure_project(ADMIN_PROJECT)


def start_cairn(database_url: str, redis_db: int, log_dir: Path, *, workers: int = 1,
                **overrides: str) -> OpenStackCairn:
    port = free_port()
    env = service_env(database_url, redis_db, **{
        "CAIRN_AUTH_STRATEGY": "keystone",
        "CAIRN_KEYSTONE": json.dumps({"auth_url": KEYSTONE, "username": "cairn",
                                      "password": SERVICE_PASSWORD,
                                      "project_name": "service"}),
        "CAIRN_CINDER": json.dumps({"cluster": "ceph-a", "pool": "volumes",
                                    "wait_seconds": 120}),
        # Short, so the revocation test need not wait a minute.
        "CAIRN_TOKEN_CACHE_SECONDS": "1",
        "CAIRN_ADMIN_PROJECTS": json.dumps([admin_project_id()]),
        **overrides,
    })
    subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "-n", str(redis_db), "flushdb"],
                   check=True, capture_output=True)
    url = f"http://127.0.0.1:{port}"
    cairn = OpenStackCairn(url, env)
    log_dir.mkdir(parents=True, exist_ok=True)
    extra_workers = tuple((f"cairn-worker-{i}", [str(BIN / "cairn-worker")], "ready")
                          for i in range(2, workers + 1))
    readiness = []
    for name, argv, ready in (
            ("cairn-worker", [str(BIN / "cairn-worker")], "ready"), *extra_workers,
            ("cairn-scheduler", [str(BIN / "cairn-scheduler")], "cairn-scheduler started"),
            # The file service the API's file routes proxy to (its port is in service_env).
            ("cairn-files", [str(BIN / "cairn-files")], "Uvicorn running"),
            ("cairn-api", [str(BIN / "cairn-api"), "--port", str(port)], "Uvicorn running")):
        proc = Process(name, argv, env, log_dir / f"{name}.log")
        proc.launch()  # side by side: none waits for another to start
        cairn.processes.append(proc)
        readiness.append((proc, ready))
    try:
        for proc, ready in readiness:
            proc.wait_ready(ready)
    except BaseException:
        cairn.stop()  # nothing outlives a Cairn that did not start
        raise
    register = subprocess.run(
        [str(BIN / "cairn-manage"), "keystone", "register", "--url", url, "--region", REGION],
        env={**os.environ, "OS_AUTH_URL": KEYSTONE, "OS_USERNAME": "admin",
             "OS_PASSWORD": ADMIN_PASSWORD, "OS_PROJECT_NAME": "admin",
             "OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default"},
        capture_output=True, text=True, check=False)
    assert register.returncode == 0, register.stderr
    return cairn


@contextmanager
def cinder_volume(user: User, name: str, size_gb: int = 1) -> Iterator[str]:
    """A Cinder volume made through Cinder as `user`; deleted afterwards."""
    api = user.cinder()
    volume = api.create(size_gb=size_gb, name=name, volume_type=None, description="test",
                        metadata={})
    try:
        api.wait_for(volume.id, "available", 120)
        yield volume.id
    finally:
        delete_volume(user, volume.id)


def delete_volume(user: User, volume_id: str) -> None:
    """Delete a Cinder volume, with Cairn's snapshots on its image removed first (Cinder's
    RBD driver refuses to delete an image that has snapshots)."""
    with ceph.ioctx("ceph-a", "volumes") as io:
        try:
            with rbd.Image(io, f"volume-{volume_id}") as image:
                for snap in list(image.list_snaps()):
                    if snap["name"].startswith("cairn."):
                        image.remove_snap(snap["name"])
        except rbd.ImageNotFound:
            pass
    api = user.cinder()
    try:
        volume = api.get(volume_id)
    except Exception:
        return
    if volume.status != "available":
        admin_cinder().action(volume_id, {"os-reset_status": {
            "status": "available", "attach_status": "detached"}})
    api.delete(volume_id)


def admin_cinder() -> CinderApi:
    return cinder_as("admin", ADMIN_PASSWORD, "admin")


def cinder_as(username: str, password: str, project: str) -> CinderApi:
    """Cinder as this Keystone user, the way any OpenStack client reaches it."""
    return CinderApi(make_session(password_auth(KEYSTONE, username, password, project)),
                     {"service_type": "volumev3", "interface": "public",
                      "region_name": "RegionOne"})


def attach(user: User, volume_id: str) -> str:
    """Attach the volume to a (pretend) server the way Nova's legacy flow does (os-reserve,
    os-attach): Cinder then reports it in-use and attached. Returns the server id."""
    server = "5e3a1c70-0000-4000-8000-00000000c0de"
    api = user.cinder()
    api.action(volume_id, {"os-reserve": None})
    api.action(volume_id, {"os-attach": {"instance_uuid": server, "mountpoint": "/dev/vdb"}})
    assert api.get(volume_id).status == "in-use"
    return server


def image_of(volume_id: str) -> str:
    return f"volume-{volume_id}"


def transfer(volume_id: str, giver: User, taker: User) -> None:
    """Hand a Cinder volume from one project to another, as tenants do (a volume transfer:
    the giver creates it, the taker accepts it with its key)."""
    give, take = giver.cinder(), taker.cinder()
    created = give.session.request("/os-volume-transfer", "POST",
                                   endpoint_filter=give.endpoint_filter,
                                   json={"transfer": {"volume_id": volume_id,
                                                      "name": "handover"}})
    body = created.json()["transfer"]
    accepted = take.session.request(f"/os-volume-transfer/{body['id']}/accept", "POST",
                                    endpoint_filter=take.endpoint_filter,
                                    json={"accept": {"auth_key": body["auth_key"]}})
    assert accepted.status_code == 202, accepted.text


GROUP_API = {"OpenStack-API-Version": "volume 3.25"}
GROUP_TYPE = "cairn-test-generic"
"""A group type without consistent_group_snapshot_enabled: Cinder's generic groups, which
its RBD driver supports."""


def _group_call(user_api: CinderApi, method: str, path: str,
                body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = user_api.session.request(path, method, endpoint_filter=user_api.endpoint_filter,
                                        json=body, headers=GROUP_API, raise_exc=False)
    assert response.status_code < 400, f"{method} {path}: {response.status_code} {response.text}"
    return response.json() if response.content else {}


def _group_type() -> str:
    api = admin_cinder()
    for kind in _group_call(api, "GET", "/group_types")["group_types"]:
        if kind["name"] == GROUP_TYPE:
            return str(kind["id"])
    made = _group_call(api, "POST", "/group_types",
                       {"group_type": {"name": GROUP_TYPE, "is_public": True}})
    return str(made["group_type"]["id"])


def _wait_group(api: CinderApi, group_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        group: dict[str, Any] = _group_call(
            api, "GET", f"/groups/{group_id}?list_volume=true")["group"]
        if group["status"] == "available":
            return group
        assert group["status"] not in ("error", "error_deleting"), group
        assert time.monotonic() < deadline, f"Cinder group {group_id} still {group['status']}"
        time.sleep(0.3)


@contextmanager
def cinder_group(user: User, name: str, volume_ids: list[str]) -> Iterator[str]:
    """A Cinder generic volume group of `user`'s project holding these volumes; on the way
    out its volumes are taken out of it (they stay) and the group is deleted."""
    api = user.cinder()
    made = _group_call(api, "POST", "/groups", {"group": {
        "name": name, "group_type": _group_type(), "volume_types": ["__DEFAULT__"]}})
    group_id = str(made["group"]["id"])
    try:
        _wait_group(api, group_id)
        if volume_ids:
            change_group(user, group_id, add=volume_ids)
        yield group_id
    finally:
        members = _wait_group(api, group_id).get("volumes") or []
        if members:
            change_group(user, group_id, remove=members)
        _group_call(api, "POST", f"/groups/{group_id}/action",
                    {"delete": {"delete-volumes": False}})


def change_group(user: User, group_id: str, *, add: Sequence[str] = (),
                 remove: Sequence[str] = ()) -> list[str]:
    """Add and remove volumes as a tenant does in Cinder; the group's volumes after."""
    api = user.cinder()
    change: dict[str, str] = {}
    if add:
        change["add_volumes"] = ",".join(add)
    if remove:
        change["remove_volumes"] = ",".join(remove)
    _group_call(api, "PUT", f"/groups/{group_id}", {"group": change})
    return sorted(_wait_group(api, group_id).get("volumes") or [])


@dataclass(frozen=True)
class VolumeType:
    id: str
    name: str


@contextmanager
def private_volume_type(name: str, *projects: User) -> Iterator[VolumeType]:
    """A private Cinder volume type that only these projects may use (Cinder's type access
    list); deleted afterwards."""
    api = admin_cinder()
    made = _type_call(api, "POST", "/types", {"volume_type": {
        "name": name, "os-volume-type-access:is_public": False}})["volume_type"]
    try:
        for user in projects:
            _type_call(api, "POST", f"/types/{made['id']}/action",
                       {"addProjectAccess": {"project": user.project_id}})
        yield VolumeType(made["id"], name)
    finally:
        _type_call(api, "DELETE", f"/types/{made['id']}")


def _type_call(api: CinderApi, method: str, path: str,
               body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = api.session.request(path, method, endpoint_filter=api.endpoint_filter,
                                   json=body, raise_exc=False)
    assert response.status_code < 400, f"{method} {path}: {response.status_code} {response.text}"
    return response.json() if response.content else {}
