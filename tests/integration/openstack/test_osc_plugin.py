"""`openstack protection …`, Debian's python-openstackclient with Cairn's plugin
(`.venv-osc/bin/openstack`, made by bootstrap), as a tenant runs it: credentials from a
clouds.yaml, Cairn found in the Keystone catalog by its service type, the README's session
end to end (back up, list the restore points, restore, verify), and each command's output
columns as `-f json` gives them."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from typing import Any

import rbd

from tests.support import ceph
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    cinder_volume,
    delete_volume,
    image_of,
)
from tests.support.stack import REPO
from tests.support.webhook_receiver import Receiver

OPENSTACK = REPO / ".venv-osc" / "bin" / "openstack"
JOB_COLUMNS = ["ID", "Kind", "Status", "Volume", "Progress", "Rate", "Duration", "Created"]


def openstack(cloud: Cloud, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    assert OPENSTACK.exists(), "no .venv-osc: run `make test` (bootstrap makes it)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "CAIRN_"))}
    env.update(OS_CLIENT_CONFIG_FILE=str(cloud.clouds_yaml), OS_CLOUD=user)
    return subprocess.run([str(OPENSTACK), *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def ok_json(cloud: Cloud, user: str, *args: str) -> Any:
    done = openstack(cloud, user, "protection", *args, "-f", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def columns(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [list(row) for row in rows]


def test_openstack_help_lists_every_command(cloud: Cloud) -> None:
    entry_points = tomllib.loads((REPO / "pyproject.toml").read_text())[
        "project"]["entry-points"]["openstack.protection.v1"]
    done = openstack(cloud, "a-member", "--help")
    assert done.returncode == 0, done.stderr
    listed = {line.split("  ")[1].strip() for line in done.stdout.splitlines()
              if line.startswith("  protection ")}
    assert listed == {name.replace("_", " ") for name in entry_points}
    assert "--os-volume-backup-endpoint-override" in done.stdout


def test_the_readme_session_with_the_openstack_client(cloud: Cloud,
                                                      os_cairn: OpenStackCairn) -> None:
    member = cloud["a-member"]
    name = ceph.unique_name("osc")
    with cinder_volume(member, name) as volume_id:
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as image:
            ceph.write_mixed(image, size=image.size(), seed=11)

        volumes = ok_json(cloud, "a-member", "volume", "list", "--name", name)
        assert columns(volumes) == [["ID", "Name", "Size (GiB)", "Status", "Protected",
                                     "Plans", "Restore points", "Newest restore point"]]
        assert volumes[0]["ID"] == volume_id
        assert ok_json(cloud, "a-member", "volume", "show", name)["id"] == volume_id
        targets = ok_json(cloud, "a-member", "target", "list")
        assert set(columns(targets)[0]) == {"Name", "Kind", "Default", "Jobs at once"}

        # Back up by the volume's Cinder name; a person gets a progress bar on stderr.
        run = openstack(cloud, "a-member", "protection", "backup", "create", name, "--full",
                        "--wait")
        assert run.returncode == 0, run.stderr
        assert "100.0%" in run.stderr
        assert "| status " in run.stdout
        assert "succeeded" in run.stdout
        backup = ok_json(cloud, "a-member", "backup", "create", name, "--wait")
        assert (backup["kind"], backup["status"]) == ("backup", "succeeded"), backup

        points = ok_json(cloud, "a-member", "restore", "point", "list", "--volume", name)
        assert columns(points) == [["ID", "Volume", "Kind", "Status", "Size", "Copied",
                                    "Took", "Created"]] * 2
        assert points[0]["ID"] == backup["restore_point_id"]  # newest first
        rp = ok_json(cloud, "a-member", "restore", "point", "show", points[1]["ID"])
        assert rp["status"] == "available"
        assert points[1]["Size"] == rp["size_bytes"]  # -f json keeps the API's numbers
        table = openstack(cloud, "a-member", "protection", "restore", "point", "list",
                          "--volume", name, "-c", "Size")
        assert " MiB " in table.stdout or " GiB " in table.stdout
        value = openstack(cloud, "a-member", "protection", "restore", "point", "show",
                          rp["id"], "-f", "value", "-c", "status")
        assert value.stdout.strip() == "available"

        verified = ok_json(cloud, "a-member", "restore", "point", "verify", rp["id"],
                           "--sample", "0.5", "--wait")
        assert (verified["kind"], verified["status"]) == ("verify", "succeeded"), verified
        shown = ok_json(cloud, "a-member", "restore", "point", "show", rp["id"])
        assert shown["verification"]["mode"] == "sampled"

        job = ok_json(cloud, "a-member", "restore", "point", "restore", rp["id"],
                      "--new-volume", "osc-restored", "--wait")
        assert job["status"] == "succeeded", job
        restored = job["restore_volume_id"]
        try:
            with ceph.ioctx("ceph-a", "volumes") as io:
                # Nothing wrote to the volume since its backups (the older restore point's
                # source snapshot is gone: a newer backup of the volume replaced it).
                assert (ceph.sha256_of(io, image_of(restored))
                        == ceph.sha256_of(io, image_of(volume_id)))
        finally:
            delete_volume(member, restored)

        jobs = ok_json(cloud, "a-member", "job", "list", "--volume", name)
        assert columns(jobs) == [JOB_COLUMNS] * len(jobs)
        assert "backup" in {j["Kind"] for j in jobs}
        assert ok_json(cloud, "a-member", "job", "show", job["id"])["id"] == job["id"]
        cancelled = openstack(cloud, "a-member", "protection", "job", "cancel", job["id"])
        assert cancelled.returncode == 1  # it ended: the API's refusal, exit 1
        assert cancelled.stderr.strip()

        locked = ok_json(cloud, "a-member", "restore", "point", "lock", rp["id"], "--until",
                         "2099-01-01T00:00:00Z")
        assert locked["locked_until"].startswith("2099-01-01")
        assert openstack(cloud, "a-member", "protection", "restore", "point", "unlock",
                         rp["id"]).returncode == 1  # only the cloud's administrator
        assert ok_json(cloud, "n-admin", "restore", "point", "unlock",
                       rp["id"])["locked_until"] is None

        _plans(cloud, name, volume_id)

        for point in ok_json(cloud, "a-member", "restore", "point", "list", "--volume",
                             volume_id):
            deleted = ok_json(cloud, "a-member", "restore", "point", "delete", point["ID"],
                              "--wait")
            assert deleted["status"] == "succeeded", deleted


def _plans(cloud: Cloud, name: str, volume_id: str) -> None:
    plan = ok_json(cloud, "a-member", "plan", "create", ceph.unique_name("osc"), "--volume",
                   name, "--incremental", "0 2 * * *", "--keep-last", "3")
    assert plan["volumes"] == [volume_id]
    try:
        plans = ok_json(cloud, "a-member", "plan", "list")
        assert columns(plans)[0] == ["ID", "Name", "Status", "Volumes", "Next run"]
        assert plan["id"] in {p["ID"] for p in plans}
        changed = ok_json(cloud, "a-member", "plan", "set", plan["id"], "--keep-daily", "7")
        assert changed["retention"]["keep_last"] == 3
        assert changed["retention"]["daily"] == 7
        assert ok_json(cloud, "a-member", "plan", "pause", plan["id"])["status"] == "paused"
        assert ok_json(cloud, "a-member", "plan", "resume", plan["id"])["status"] == "enabled"
        ran = ok_json(cloud, "a-member", "plan", "run", plan["id"], "--wait")
        assert columns(ran) == [JOB_COLUMNS]
        assert ran[0]["Status"] == "succeeded"
        assert ok_json(cloud, "a-member", "plan", "show", plan["id"])["id"] == plan["id"]
    finally:
        done = openstack(cloud, "a-member", "protection", "plan", "delete", plan["id"])
        assert done.returncode == 0, done.stderr


def test_webhooks_quotas_and_usage(cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    receiver = Receiver()
    try:
        hook = ok_json(cloud, "a-member", "webhook", "create", receiver.url, "--event",
                       "backup.create.error")
        assert hook["secret"]
        hooks = ok_json(cloud, "a-member", "webhook", "list")
        assert columns(hooks)[0] == ["ID", "URL", "Events", "Enabled", "Disabled because"]
        assert ok_json(cloud, "a-member", "webhook", "set", hook["id"],
                       "--disable")["enabled"] is False
        assert ok_json(cloud, "a-member", "webhook", "show", hook["id"])["id"] == hook["id"]
        done = openstack(cloud, "a-member", "protection", "webhook", "delete", hook["id"])
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    finally:
        receiver.close()

    usage = ok_json(cloud, "a-member", "usage", "show")
    assert set(usage) >= {"limits", "usage"}
    project = cloud["a-member"].project_id
    assert openstack(cloud, "a-member", "protection", "quota", "show", project).returncode == 1
    before = ok_json(cloud, "n-admin", "quota", "show", project)
    try:
        quota = ok_json(cloud, "n-admin", "quota", "set", project, "--restore-points", "500")
        assert quota["limits"]["restore_points"] == 500
        assert quota["limits"]["gigabytes"] == before["limits"]["gigabytes"]
    finally:
        limits = before["limits"]
        ok_json(cloud, "n-admin", "quota", "set", project, "--restore-points",
                "none" if limits["restore_points"] is None else str(limits["restore_points"]))
