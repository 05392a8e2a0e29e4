"""Cairn as Cinder's backup driver (cairn_cinder.backup): a tenant's `openstack volume
backup` flows on real Cinder, Debian's cinder-backup running the driver, this session's
Cairn and Ceph. The backups are Cairn restore points of the tenant's project (GET
/v1/restore-points), restores are byte-exact (sha256 of the RBD images), and a Cairn
refusal is the backup's `error` with Cairn's reason.

Serial: the test starts Cinder's one backup service (tests/support/cinder_backup.py says
why one at a time), which every backup of the stack's Cinder then goes to."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rbd

from tests.support import ceph, cinder_backup
from tests.support.cinder_backup import delete_backup, wait_backup
from tests.support.openstack import (
    ADMIN_PROJECT,
    KEYSTONE,
    PASSWORD,
    Cloud,
    OpenStackCairn,
    User,
    attach,
    cinder_volume,
    image_of,
)

pytestmark = pytest.mark.serial
MIB = 1 << 20


@pytest.fixture(scope="module")
def backup_service(cloud: Cloud, os_cairn: OpenStackCairn,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """cinder-backup with Cairn's driver, acting as the cloud's administrator (n-admin),
    against this session's Cairn; ready once a probe backup succeeded."""
    directory = tmp_path_factory.mktemp("cinder-backup")
    conf = cinder_backup.write_conf(directory / "cinder-backup.conf",
                                    cinder_backup.cairn_driver_options(
                                        os_cairn.url, username="n-admin", password=PASSWORD,
                                        project=ADMIN_PROJECT, auth_url=KEYSTONE),
                                    cinder_backup.Concurrency())
    service = cinder_backup.start(conf, directory / "cinder-backup.log",
                                  cinder_backup.Concurrency())
    try:
        member = cloud["a-member"]
        with cinder_volume(member, ceph.unique_name("probe")) as probe:
            cinder_backup.wait_until_placeable(service, member.cinder(), probe)
        yield
    finally:
        service.stop()


def openstack(user: User, *args: str, check: bool = True) -> Any:
    """Debian's `openstack` CLI as `user` (system Python), answering JSON."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env |= {"OS_AUTH_URL": KEYSTONE, "OS_USERNAME": user.name, "OS_PASSWORD": PASSWORD,
            "OS_PROJECT_NAME": user.project, "OS_USER_DOMAIN_NAME": "Default",
            "OS_PROJECT_DOMAIN_NAME": "Default", "OS_REGION_NAME": "RegionOne",
            "OS_IDENTITY_API_VERSION": "3", "OS_VOLUME_API_VERSION": "3"}
    env.pop("PYTHONPATH", None)
    run = subprocess.run(["/usr/bin/openstack", *args, *(["-f", "json"] if check else [])],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    if not check:
        return run
    assert run.returncode == 0, f"openstack {' '.join(args)}: {run.stderr}"
    return json.loads(run.stdout) if run.stdout.strip() else None


def create(user: User, volume_id: str, name: str, *flags: str) -> dict[str, Any]:
    made = openstack(user, "volume", "backup", "create", "--name", name, *flags, volume_id)
    return wait_backup(user.cinder(), made["id"], 300)


def restore(user: User, backup_id: str, volume_id: str | None = None) -> str:
    """Cinder's restore API (what `openstack volume backup restore` and `cinder
    backup-restore` call): into a new volume, or over `volume_id`. Waits until done."""
    api = user.cinder()
    body: dict[str, Any] = {"restore": {"volume_id": volume_id} if volume_id else {}}
    answer = api.session.post(f"/backups/{backup_id}/restore", json=body,
                              endpoint_filter=api.endpoint_filter)
    target = answer.json()["restore"]["volume_id"]
    done = wait_backup(api, backup_id, 300, until=("available", "error"))
    assert done["status"] == "available", done
    api.wait_for(target, "available", 300)
    return str(target)


def sha(volume_id: str) -> str:
    with ceph.ioctx("ceph-a", "volumes") as io:
        return ceph.sha256_of(io, image_of(volume_id))


def write(volume_id: str, seed: int, offset: int = 0) -> None:
    with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as image:
        if offset:
            image.write(os.urandom(4 * MIB), offset)
        else:
            ceph.write_mixed(image, size=image.size(), seed=seed)


def cairn_restore_points(os_cairn: OpenStackCairn, user: User, volume_id: str
                         ) -> list[dict[str, Any]]:
    answer = os_cairn.call("GET", "/v1/restore-points", user.token(),
                           params={"volume": volume_id})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["restore_points"])


@pytest.mark.usefixtures("backup_service")
def test_backups_restores_and_deletes_through_cinder_run_on_cairn(
        cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    member = cloud["a-member"]
    with cinder_volume(member, ceph.unique_name("driver")) as volume_id:
        write(volume_id, seed=11)
        full_sha = sha(volume_id)
        full = create(member, volume_id, "full")
        assert full["status"] == "available", full.get("fail_reason")
        write(volume_id, seed=0, offset=300 * MIB)  # a day's writes
        incremental_sha = sha(volume_id)
        assert incremental_sha != full_sha
        incremental = create(member, volume_id, "incremental", "--incremental")
        assert incremental["status"] == "available", incremental.get("fail_reason")

        # The same backups, as Cairn restore points of the tenant's project.
        points = cairn_restore_points(os_cairn, member, volume_id)
        assert sorted(rp["kind"] for rp in points) == ["full", "incremental"]
        assert {rp["project_id"] for rp in points} == {member.project_id}
        assert all(rp["status"] == "available" for rp in points)

        # Onto a new volume (Cinder makes it), then onto the original.
        new_volume = restore(member, full["id"])
        try:
            assert sha(new_volume) == full_sha
        finally:
            member.cinder().delete(new_volume)
        write(volume_id, seed=99)  # the volume goes bad
        assert restore(member, incremental["id"], volume_id) == volume_id
        assert sha(volume_id) == incremental_sha

        # Out of order: the full first (Cairn's restore points are independent; Cinder's
        # own Ceph driver would refuse while the incremental depends on it).
        deleted = openstack(member, "volume", "backup", "delete", full["id"], check=False)
        assert deleted.returncode == 0, deleted.stderr
        delete_backup(member.cinder(), full["id"])  # waits until Cinder has it gone
        left = cairn_restore_points(os_cairn, member, volume_id)
        assert [rp["kind"] for rp in left if rp["status"] == "available"] == ["incremental"]
        again = restore(member, incremental["id"])
        try:
            assert sha(again) == incremental_sha
        finally:
            member.cinder().delete(again)
        delete_backup(member.cinder(), incremental["id"])
        assert not [rp for rp in cairn_restore_points(os_cairn, member, volume_id)
                    if rp["status"] == "available"]


@pytest.mark.usefixtures("backup_service")
def test_an_in_use_volume_is_backed_up_with_force(cloud: Cloud) -> None:
    """Attached the way Nova's legacy flow does (os-reserve, os-attach with a server id of
    nobody's): Cinder wants --force, then Cairn backs the volume up as it is."""
    member = cloud["a-member"]
    with cinder_volume(member, ceph.unique_name("in-use")) as volume_id:
        write(volume_id, seed=12)
        digest = sha(volume_id)
        attach(member, volume_id)
        refused = openstack(member, "volume", "backup", "create", volume_id, check=False)
        assert refused.returncode != 0
        assert "force" in refused.stderr.lower()
        backup = create(member, volume_id, "in-use", "--force")
        assert backup["status"] == "available", backup.get("fail_reason")
        assert member.cinder().get(volume_id).status == "in-use"
        copy = restore(member, backup["id"])
        try:
            assert sha(copy) == digest
        finally:
            member.cinder().delete(copy)
        delete_backup(member.cinder(), backup["id"])


@pytest.mark.usefixtures("backup_service")
def test_a_cairn_refusal_is_the_backups_error_with_cairns_reason(
        cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    """Cairn's quota for the project is full: the backup goes to `error`, and its
    fail_reason is Cairn's own words, which the tenant can act on."""
    member, admin = cloud["a-member"], cloud["n-admin"]
    quota_path = f"/v1/quotas/{member.project_id}"
    before = os_cairn.call("GET", quota_path, admin.token()).json()
    full = os_cairn.call("PUT", quota_path, admin.token(), json={"gigabytes": 0})
    assert full.status_code == 200, full.text
    try:
        with cinder_volume(member, ceph.unique_name("over-quota")) as volume_id:
            write(volume_id, seed=13)
            backup = create(member, volume_id, "over-quota")
            assert backup["status"] == "error"
            reason = backup["fail_reason"]
            assert reason.startswith("Cairn refused to back up volume"), reason
            assert f"storage quota of project '{member.project_id}' exceeded" in reason
            assert member.cinder().get(volume_id).status == "available"
            delete_backup(member.cinder(), backup["id"])
    finally:
        os_cairn.call("PUT", quota_path, admin.token(),
                      json={k: before["limits"][k] for k in ("restore_points", "gigabytes")})


def test_the_driver_runs_in_cinders_python_with_nothing_of_cairns() -> None:
    """Imported by Debian's python3 beside Debian's Cinder, without the virtualenv."""
    repo = Path(__file__).resolve().parents[3]
    run = subprocess.run(["/usr/bin/python3", "-c", "import cinder.backup.driver, "
                          "cairn_cinder.backup as d; print(d.CairnBackupDriver.__name__)"],
                         cwd=repo, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin"},
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.stdout.strip() == "CairnBackupDriver", run.stderr
