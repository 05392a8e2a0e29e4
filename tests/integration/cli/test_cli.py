"""`cairn` end to end as a user runs it: credentials from a clouds.yaml, Cairn found in the
Keystone catalog, tables for people, `-f json` for scripts, a progress bar with `--wait`,
and the API's message with a non-zero exit on errors."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from typing import Any

import rbd

from services.webhooks import signing
from tests.integration.openstack.conftest import Protected
from tests.support import ceph
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    cinder_volume,
    delete_volume,
    image_of,
)
from tests.support.stack import BIN
from tests.support.webhook_receiver import Receiver


def cairn(cloud: Cloud, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "CAIRN_"))}
    env.update(OS_CLIENT_CONFIG_FILE=str(cloud.clouds_yaml), OS_CLOUD=user)
    return subprocess.run([str(BIN / "cairn"), *args], env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def ok_json(cloud: Cloud, user: str, *args: str) -> Any:
    done = cairn(cloud, user, *args, "-f", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_cli_session_from_clouds_yaml(cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    member = cloud["a-member"]
    name = ceph.unique_name("cli")
    with cinder_volume(member, name) as volume_id:
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as image:
            ceph.write_mixed(image, size=image.size(), seed=9)

        volumes = ok_json(cloud, "a-member", "volume", "list")["volumes"]
        assert volume_id in {v["id"] for v in volumes}

        plan = ok_json(cloud, "a-member", "plan", "create", "--name", ceph.unique_name("cli"),
                       "--volume", volume_id, "--incremental", "0 2 * * *",
                       "--full", "0 3 * * 0", "--timezone", "Europe/Berlin",
                       "--keep-last", "3", "--keep-daily", "7")
        assert plan["volumes"] == [volume_id]

        # People get a table and a progress bar on stderr.
        run = cairn(cloud, "a-member", "plan", "run", plan["id"], "--full", "--wait")
        assert run.returncode == 0, run.stderr
        assert "100.0%" in run.stderr
        assert "#" * 30 in run.stderr
        assert "| ID" in run.stdout
        assert "succeeded" in run.stdout

        points = ok_json(cloud, "a-member", "restore-point", "list", "--volume", volume_id)
        [rp] = points["restore_points"]
        assert rp["status"] == "available"
        # By its Cinder name, as `openstack volume show NAME` takes it; a person's table
        # reads the size in GiB where -f json keeps the bytes.
        assert ok_json(cloud, "a-member", "restore-point", "list", "--volume", name) == points
        table = cairn(cloud, "a-member", "restore-point", "list", "--volume", name)
        assert table.returncode == 0, table.stderr
        assert " GiB " in table.stdout or " MiB " in table.stdout
        assert str(rp["size_bytes"]) not in table.stdout
        unknown = cairn(cloud, "a-member", "restore-point", "list", "--volume", name + "-x")
        assert unknown.returncode == 1
        assert "no volume named" in unknown.stderr

        verified = ok_json(cloud, "a-member", "restore-point", "verify", rp["id"],
                           "--sample", "0.5", "--wait")
        assert verified["status"] == "succeeded", verified
        shown = ok_json(cloud, "a-member", "restore-point", "show", rp["id"])
        assert shown["verification"]["mode"] == "sampled"
        locked = ok_json(cloud, "a-member", "restore-point", "lock", rp["id"], "--until",
                         "2099-01-01T00:00:00Z")
        assert locked["locked_until"].startswith("2099-01-01")
        unlock = cairn(cloud, "a-member", "restore-point", "lock", rp["id"])
        assert unlock.returncode == 1
        assert "only an administrator" in unlock.stderr
        # Project A's own admin may not either: only the cloud's administrator.
        assert cairn(cloud, "a-admin", "restore-point", "lock", rp["id"]).returncode == 1
        assert cairn(cloud, "n-admin", "restore-point", "lock", rp["id"]).returncode == 0

        job = ok_json(cloud, "a-member", "restore", "create", rp["id"], "--new-volume",
                      "cli-restored", "--wait")
        assert job["status"] == "succeeded", job
        restored = job["restore_volume_id"]
        try:
            with ceph.ioctx("ceph-a", "volumes") as io:
                assert (ceph.sha256_of(io, image_of(restored))
                        == ceph.sha256_of(io, image_of(volume_id),
                                          snapshot=rp["source_snapshot"]))
        finally:
            delete_volume(member, restored)

        # Off site: the restore point copied to the object target, from the backup pool;
        # the copy restores into a new Cinder volume, and in place over the volume itself
        # (scribbled over first: every byte, holes included, must come back).
        copied = ok_json(cloud, "a-member", "restore-point", "copy", rp["id"], "--target",
                         "s3", "--wait")
        assert (copied["kind"], copied["status"]) == ("copy", "succeeded"), copied
        copy_id = copied["restore_point_id"]
        expected = None
        with ceph.ioctx("ceph-a", "volumes") as io:
            expected = ceph.sha256_of(io, image_of(volume_id), snapshot=rp["source_snapshot"])
        job = ok_json(cloud, "a-member", "restore", "create", copy_id, "--new-volume",
                      "cli-from-s3", "--wait")
        assert job["status"] == "succeeded", job
        try:
            with ceph.ioctx("ceph-a", "volumes") as io:
                assert ceph.sha256_of(io, image_of(job["restore_volume_id"])) == expected
        finally:
            delete_volume(member, job["restore_volume_id"])
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as image:
            image.write(b"\xff" * (image.size() // 2), image.size() // 4)
        job = ok_json(cloud, "a-member", "restore", "create", copy_id, "--volume", volume_id,
                      "--wait")
        assert job["status"] == "succeeded", job
        with ceph.ioctx("ceph-a", "volumes") as io:
            assert ceph.sha256_of(io, image_of(volume_id)) == expected

        jobs = ok_json(cloud, "a-member", "job", "list", "--plan", plan["id"],
                       "--kind", "backup")["jobs"]
        assert [j["kind"] for j in jobs] == ["backup"]
        table = cairn(cloud, "a-member", "volume", "list")
        assert table.returncode == 0
        assert volume_id in table.stdout
        assert "True" in table.stdout

        deleted = cairn(cloud, "a-member", "plan", "delete", plan["id"])
        assert deleted.returncode == 0, deleted.stderr

        offsite = ok_json(cloud, "a-member", "plan", "create", "--name",
                          ceph.unique_name("cli-offsite"), "--volume", volume_id,
                          "--incremental", "0 2 * * *", "--keep-daily", "7", "--offsite", "s3",
                          "--offsite-every", "month", "--offsite-keep-last", "12")
        assert offsite["offsite"] == {"target": "s3", "every": "month",
                                      "retention": {"keep_last": 12, "daily": 0, "weekly": 0,
                                                    "monthly": 0, "yearly": 0}}, offsite
        refused = cairn(cloud, "a-member", "plan", "create", "--name", "x", "--volume",
                        volume_id, "--incremental", "0 2 * * *", "--offsite", "local")
        assert refused.returncode == 1
        assert "copies go to an object target" in refused.stderr
        assert cairn(cloud, "a-member", "plan", "delete", offsite["id"]).returncode == 0


def test_cli_errors_exit_non_zero_with_the_api_message(cloud: Cloud, os_cairn: OpenStackCairn,
                                                      protected: Protected) -> None:
    missing = cairn(cloud, "a-member", "plan", "show", str(uuid.uuid4()))
    assert missing.returncode == 1
    assert "not found" in missing.stderr
    malformed = cairn(cloud, "a-member", "plan", "show", "no-such-plan")
    assert malformed.returncode == 1
    assert "not a valid id" in malformed.stderr

    other = cairn(cloud, "b-member", "backup", "create", protected.volume_id)
    assert other.returncode == 1
    assert "not found" in other.stderr

    reader = cairn(cloud, "a-reader", "plan", "run", protected.plan_id)
    assert reader.returncode == 1
    assert "may not run plans" in reader.stderr

    bad_cron = cairn(cloud, "a-member", "plan", "create", "--name", "bad", "--volume",
                     protected.volume_id, "--incremental", "61 2 * * *")
    assert bad_cron.returncode == 1
    assert "minute" in bad_cron.stderr

    usage = cairn(cloud, "a-member", "restore", "create", protected.restore_point_id)
    assert usage.returncode == 2
    assert "exactly one of --new-volume" in usage.stderr

    unknown_cloud = cairn(cloud, "nobody", "plan", "list")
    assert unknown_cloud.returncode == 1
    assert "cloud 'nobody' is not in any clouds.yaml" in unknown_cloud.stderr


def test_cli_manages_webhooks(cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    receiver = Receiver()
    try:
        bad = cairn(cloud, "a-member", "webhook", "create", "http://169.254.169.254/")
        assert bad.returncode == 1
        assert "public address" in bad.stderr

        hook = ok_json(cloud, "a-member", "webhook", "create", receiver.url,
                       "--event", "webhook.test", "--event", "backup.create.error")
        assert hook["secret"].startswith("whsec_")
        listed = cairn(cloud, "a-member", "webhook", "list")
        assert listed.returncode == 0, listed.stderr
        assert hook["id"] in listed.stdout
        assert "backup.create.error" in listed.stdout
        assert "whsec_" not in listed.stdout  # shown once, at creation

        sent = ok_json(cloud, "a-member", "webhook", "test", hook["id"])
        (request,) = receiver.wait_for(1)
        assert request.headers["webhook-id"] == sent["id"]
        assert signing.verify(hook["secret"], sent["id"],
                              int(request.headers["webhook-timestamp"]), request.body,
                              request.headers["webhook-signature"])
        log = ok_json(cloud, "a-member", "webhook", "deliveries", hook["id"])["deliveries"]
        assert [(d["event_type"], d["status"]) for d in log] == [("webhook.test", "succeeded")]

        rotated = ok_json(cloud, "a-member", "webhook", "rotate-secret", hook["id"])
        assert rotated["secret"] != hook["secret"]
        disabled = ok_json(cloud, "a-member", "webhook", "set", hook["id"], "--disable")
        assert disabled["enabled"] is False
        assert cairn(cloud, "a-reader", "webhook", "delete", hook["id"]).returncode == 1
        assert cairn(cloud, "b-member", "webhook", "show", hook["id"]).returncode == 1
        deleted = cairn(cloud, "a-member", "webhook", "delete", hook["id"])
        assert deleted.returncode == 0, deleted.stderr
        assert cairn(cloud, "a-member", "webhook", "show", hook["id"]).returncode == 1
    finally:
        receiver.close()


def test_cli_shows_what_other_systems_wrote_as_text(cloud: Cloud,
                                                    os_cairn: OpenStackCairn) -> None:
    """Cinder takes any volume name: escape sequences (here: clear the screen, retitle the
    terminal), a bidi override and a zero-width space reach the table escaped, never the
    terminal raw; `-f json` keeps the exact name (JSON escapes it)."""
    hostile = f"\x1b[2J\x1b]0;owned\x07evil\u202egnp.exe\u200b-{uuid.uuid4().hex[:6]}"
    with cinder_volume(cloud["a-member"], hostile) as volume_id:
        # This session's Cairn by its URL: the catalog's entry is the last session's to
        # register, when sessions run side by side.
        listed = cairn(cloud, "a-member", "--os-endpoint", os_cairn.url, "volume", "list")
        assert listed.returncode == 0, listed.stderr
        for raw in ("\x1b", "\x07", "\u202e", "\u200b"):
            assert raw not in listed.stdout, repr(raw)
        row = next(line for line in listed.stdout.splitlines() if volume_id in line)
        assert "\\x1b[2J\\x1b]0;owned\\x07evil\\u202egnp.exe\\u200b-" in row, row
        exact = ok_json(cloud, "a-member", "--os-endpoint", os_cairn.url, "volume",
                        "list")["volumes"]
        assert hostile in {v["name"] for v in exact}
