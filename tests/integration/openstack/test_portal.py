"""The portal in a real browser (Debian's Chromium, driven by Playwright) on a real Cairn
with Keystone, Cinder and Ceph: project A's member signs in, backs a Cinder volume up from
the volume list and watches it finish; a reader sees no write button; signing out ends the
session; a restore point of an ext4 volume is browsed, a file of it downloaded and its
versions found (e2e/files.spec.ts). The screenshots it takes are the README's
(docs/portal/) when asked (CAIRN_E2E_SCREENSHOTS=docs/portal), else the test's own files.
The session's Keystone side (wrong password, another user's project, revocation on
sign-out) is checked here too, through the API."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import rbd

from tests.support import browser, ceph
from tests.support.openstack import (
    PASSWORD,
    Cloud,
    OpenStackCairn,
    cinder_volume,
    delete_volume,
    image_of,
)


def _sign_in(cairn: OpenStackCairn, user: str, **extra: str) -> httpx.Client:
    """A client holding the user's session cookie. Sent by hand: a client's cookie jar keeps
    the Secure `__Host-` cookie away from http://127.0.0.1, where Chromium sends it."""
    browser = httpx.Client(base_url=cairn.url, timeout=60)
    response = browser.post("/v1/session", json={"domain": "Default", "username": user,
                                                  "password": PASSWORD, **extra})
    assert response.status_code == 200, response.text
    cookie = response.headers["set-cookie"].split(";", 1)[0]
    assert cookie.startswith("__Host-cairn_session="), response.headers["set-cookie"]
    browser.cookies.clear()
    browser.headers["Cookie"] = cookie
    return browser


def test_the_keystone_session_is_the_users_and_ends_at_sign_out(
        cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    anonymous = httpx.Client(base_url=os_cairn.url, timeout=60)
    assert anonymous.get("/v1/session/options").json() == {"auth_strategy": "keystone"}
    wrong = anonymous.post("/v1/session", json={"username": "a-member", "password": "nope"})
    assert wrong.status_code == 401
    assert "user name or password is wrong" in wrong.json()["error"]["message"]
    no_password = anonymous.post("/v1/session", json={"username": "a-member"})
    assert no_password.status_code == 422

    browser = _sign_in(os_cairn, "a-member")
    session = browser.get("/v1/session").json()
    assert session["project_id"] == cloud["a-member"].project_id
    assert [p["id"] for p in session["projects"]] == [cloud["a-member"].project_id]
    assert "backup:create" in session["allowed"]
    assert "quota:update" not in session["allowed"]
    assert "token" not in str(session).lower().replace("csrf_token", "")
    csrf = session["csrf_token"]
    # Keystone decides which projects are the user's: B is not A's member's.
    other = browser.put("/v1/session/project",
                        json={"project_id": cloud["b-member"].project_id},
                        headers={"X-CSRF-Token": csrf})
    assert other.status_code == 403, other.text
    assert browser.get("/v1/jobs").status_code == 200
    assert "plan:create" not in _sign_in(os_cairn, "a-reader").get(
        "/v1/session").json()["allowed"]

    cookie = browser.headers["Cookie"]
    out = browser.delete("/v1/session", headers={"X-CSRF-Token": csrf})
    assert out.status_code == 200, out.text
    assert out.json()["tokens_revoked"] is True, out.json()
    # The cookie a thief kept is no use either: the session is signed out, and its tokens
    # were revoked at Keystone.
    replay = httpx.get(f"{os_cairn.url}/v1/jobs", headers={"Cookie": cookie}, timeout=60)
    assert replay.status_code == 401, replay.text


# Chromium and the portal's own timeouts: alone, after the parallel phase.
@pytest.mark.serial
def test_a_member_protects_a_volume_in_the_browser(cloud: Cloud, os_cairn: OpenStackCairn,
                                                   tmp_path: Path) -> None:
    browser.require_portal()
    member, admin = cloud["a-member"], cloud["n-admin"]
    name = ceph.unique_name("portal")
    plan_name = ceph.unique_name("portal-plan")
    admin_image = f"ceph-a/volumes/{ceph.unique_name('portal-admin-restore')}"
    with cinder_volume(member, name) as volume_id, \
            cinder_volume(admin, ceph.unique_name("portal-admin")) as admin_volume_id, \
            cinder_volume(member, ceph.unique_name("portal-files")) as files_volume_id:
        for volume, seed in ((volume_id, 14), (admin_volume_id, 15)):
            with ceph.ioctx("ceph-a", "volumes") as io, \
                    rbd.Image(io, image_of(volume)) as image:
                ceph.write_mixed(image, size=8 * ceph.MiB + 4096 * 3, seed=seed)
        admin_rp = _backed_up(os_cairn, admin.token(), admin_volume_id)
        files_rps = _files_backed_up_twice(os_cairn, member.token(), files_volume_id,
                                           tmp_path)
        run = browser.playwright(os_cairn.url, tmp_path, {
            "CAIRN_E2E_MEMBER": "a-member", "CAIRN_E2E_READER": "a-reader",
            "CAIRN_E2E_PASSWORD": PASSWORD, "CAIRN_E2E_VOLUME": name,
            "CAIRN_E2E_PLAN": plan_name, "CAIRN_E2E_VOLUME_ID": volume_id,
            "CAIRN_E2E_OTHER": "b-member", "CAIRN_E2E_ADMIN": "n-admin",
            "CAIRN_E2E_ADMIN_VOLUME_ID": admin_volume_id,
            "CAIRN_E2E_ADMIN_IMAGE": admin_image,
            "CAIRN_E2E_FILES_VOLUME_ID": files_volume_id,
            "CAIRN_E2E_FILES_OLDER_POINT": files_rps[0]["id"],
            "CAIRN_E2E_FILES_POINT": files_rps[1]["id"],
            "CAIRN_E2E_FILES_TEXT": APP_CONF[1]})
        token = member.token()
        try:
            assert run.returncode == 0, browser.output(run)
            _check_what_the_browser_did(os_cairn, token, volume_id)
            # The administrator's restore into a new RBD image: the restore point's bytes.
            with ceph.ioctx("ceph-a", "volumes") as volumes:
                restored = ceph.sha256_of(volumes, admin_image.rsplit("/", maxsplit=1)[-1])
                assert restored == ceph.sha256_of(volumes, image_of(admin_volume_id),
                                                  snapshot=admin_rp["source_snapshot"])
        finally:
            for plan in os_cairn.call("GET", "/v1/plans", token).json()["plans"]:
                if plan["name"] == plan_name:
                    os_cairn.call("DELETE", f"/v1/plans/{plan['id']}", token)
            for job in os_cairn.call("GET", "/v1/jobs", token, params={
                    "volume": volume_id, "kind": "restore"}).json()["jobs"]:
                if job.get("restore_volume_id"):
                    delete_volume(member, job["restore_volume_id"])
            with ceph.ioctx("ceph-a", "volumes") as volumes:
                ceph.remove_image(volumes, admin_image.rsplit("/", maxsplit=1)[-1])
            os_cairn.call("DELETE", f"/v1/restore-points/{admin_rp['id']}", admin.token())
            for rp in reversed(files_rps):
                os_cairn.call("DELETE", f"/v1/restore-points/{rp['id']}", token)
    shutil.rmtree(browser.PORTAL / "test-results", ignore_errors=True)


def _backed_up(cairn: OpenStackCairn, token: str, volume_id: str,
               kind: str = "full") -> dict[str, Any]:
    started = cairn.call("POST", "/v1/backups", token, json={"volume": volume_id,
                                                             "kind": kind})
    assert started.status_code == 202, started.text
    job = cairn.wait_job(started.json()["id"], token)
    assert job["status"] == "succeeded", job
    rp: dict[str, Any] = cairn.call("GET", f"/v1/restore-points/{job['restore_point_id']}",
                                    token).json()
    return rp


APP_CONF = ("listen 80;\nworkers 2;\n", "listen 8080;\nworkers 4; # changed\n")
"""/etc/app.conf in the files volume's older and newer restore point (e2e/files.spec.ts)."""


def _files_backed_up_twice(cairn: OpenStackCairn, token: str, volume_id: str,
                           tmp_path: Path) -> list[dict[str, Any]]:
    """An ext4 filesystem over the whole volume (no partition table, made by mke2fs -d from
    a tree), backed up, then made again with /etc/app.conf changed and backed up again:
    the older and the newer restore point, for the file browser's test."""
    points = []
    for version, text in enumerate(APP_CONF):
        tree = tmp_path / f"tree-{version}"
        for path, content in {"etc/app.conf": text, "etc/hosts": "127.0.0.1 localhost\n",
                              "home/user/notes.txt": "remember the milk\n",
                              "readme.txt": "a filesystem for the portal's file browser\n"
                              }.items():
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(content)
        fs = tmp_path / f"fs-{version}.img"
        subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-L", "portal",
                        "-d", str(tree), str(fs), "32M"], check=True, capture_output=True)
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as image, \
                fs.open("rb") as source:
            offset = 0
            while chunk := source.read(4 * ceph.MiB):
                image.write(chunk, offset)
                offset += len(chunk)
        points.append(_backed_up(cairn, token, volume_id, "full" if version == 0
                                 else "incremental"))
    return points


def _check_what_the_browser_did(cairn: OpenStackCairn, token: str, volume_id: str) -> None:
    """Both backups the browser started succeeded; the restore it made through the wizard
    holds exactly the bytes of the plan's restore point and of its source; the verify it
    asked for found the restore point intact."""
    backups = cairn.call("GET", "/v1/jobs", token,
                         params={"volume": volume_id, "kind": "backup"}).json()["jobs"]
    # From the list, then the plan's two runs.
    assert [j["status"] for j in backups] == ["succeeded"] * 3, backups
    restores = cairn.call("GET", "/v1/jobs", token,
                          params={"volume": volume_id, "kind": "restore"}).json()["jobs"]
    assert [j["status"] for j in restores] == ["succeeded"], restores
    rp = cairn.call("GET", f"/v1/restore-points/{restores[0]['restore_point_id']}",
                    token).json()
    assert rp["plan_id"] is not None
    assert rp["verification"]["status"] == "ok", rp["verification"]
    # The restore point's source snapshot went when the plan's second run made the next
    # one (an incremental chain keeps the newest); the volume was not written since, so its
    # bytes are the snapshot's. The restore point's own copy in the backup pool is checked
    # too.
    with ceph.ioctx("ceph-a", "volumes") as volumes:
        source = ceph.sha256_of(volumes, image_of(volume_id))
        restored = ceph.sha256_of(volumes, image_of(restores[0]["restore_volume_id"]))
    with ceph.ioctx("ceph-a", "backups") as backups:
        kept = ceph.sha256_of(backups, rp["backup_image"], snapshot=rp["backup_snapshot"])
    assert restored == source == kept
