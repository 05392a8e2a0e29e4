"""Hostile and out-of-range input is answered 4xx with the usual error body, quickly, and
costs the server nothing lasting: schedules that would loop or walk for seconds, numbers
over the columns, dates at the calendar's ends, ids with NUL bytes, names with newlines."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import rados
import rbd

from tests.integration.api.test_errors import error_of
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import CLOUD_ADMIN, Stack

pytestmark = pytest.mark.ceph

QUICK = 1.0
"""Seconds a refusal may take here (it takes milliseconds; the margin is for a loaded CI
machine). Before the fixes, INTERVAL=0 never answered and a never-firing rule took 6 s."""


@pytest.fixture(scope="module")
def volume(stack: Stack) -> Iterator[str]:
    name = ceph.unique_name("hostile")
    with ceph.ioctx("ceph-a", "volumes") as io:
        rbd.RBD().create(io, name, 4 * MiB)
        yield f"ceph-a/volumes/{name}"
        ceph.remove_image(io, name)


def plan_body(volume: str, **rule: Any) -> dict[str, Any]:
    return {"name": f"hostile-{uuid.uuid4().hex[:8]}", "volumes": [volume], "rules": [rule]}


def refused_quickly(call: Any, status: int = 422) -> dict[str, str]:
    started = time.monotonic()
    response = call()
    elapsed = time.monotonic() - started
    err = error_of(response, status)
    assert elapsed < QUICK, f"{elapsed:.2f} s to refuse: {err}"
    return err


@pytest.mark.parametrize(("rule", "says"), [
    ({"rrule": "FREQ=DAILY;INTERVAL=0"}, "INTERVAL"),
    ({"rrule": "FREQ=DAILY;INTERVAL=-1"}, "INTERVAL"),
    ({"rrule": "FREQ=DAILY;INTERVAL=99999999999999999999999"}, "INTERVAL"),
    ({"rrule": "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=31"}, "match"),
    ({"rrule": "FREQ=HOURLY;INTERVAL=2;BYDAY=MO;BYMONTH=2;BYMONTHDAY=30"}, "match"),
    ({"rrule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}, "match"),
    ({"rrule": "FREQ=YEARLY;INTERVAL=1000"}, "no slot"),
    ({"rrule": "FREQ=DAILY;UNTIL=20200101T000000"}, "UNTIL"),
    ({"rrule": "FREQ=DAILY;COUNT=3"}, "COUNT"),
    ({"rrule": "FREQ=HOURLY;BYMINUTE=0,30"}, "30 minutes apart"),
    ({"cron": "* * * * *"}, "1 minute apart"),
    ({"cron": "*/20 * * * *"}, "20 minutes apart"),
    ({"cron": "\u00b2 2 * * *"}, "not a number"),
    ({"cron": "0 2 * * \u0661"}, "not a number"),
    ({"rrule": "FREQ=DAILY", "start": "2000-01-01T00:00:00"}, "start"),
    ({"rrule": "FREQ=DAILY", "start": "9999-12-31T23:59:00"}, "start"),
])
def test_costly_or_impossible_schedules_are_refused_quickly(
        stack: Stack, volume: str, rule: dict[str, str], says: str) -> None:
    err = refused_quickly(lambda: stack.post("/v1/plans", plan_body(volume, **rule)))
    assert says in err["message"]
    # The same rule given to an existing plan is refused the same way, leaving it as it was.
    plan = stack.post("/v1/plans", plan_body(volume, cron="0 2 * * *")).json()
    try:
        err = refused_quickly(lambda: stack.client.patch(
            f"/v1/plans/{plan['id']}", json={"rules": [rule]},
            headers={"X-Project-Id": "project-a"}))
        assert says in err["message"]
        assert stack.get(f"/v1/plans/{plan['id']}").json()["rules"][0]["cron"] == "0 2 * * *"
    finally:
        stack.delete(f"/v1/plans/{plan['id']}")


def test_hourly_and_rare_rules_still_pass(stack: Stack, volume: str) -> None:
    for rule in ({"cron": "0 * * * *"}, {"rrule": "FREQ=HOURLY"},
                 {"rrule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=1;BYMINUTE=0"},
                 {"rrule": "FREQ=DAILY", "start": "2026-01-01T00:00:00"}):
        response = stack.post("/v1/plans", plan_body(volume, **rule))
        assert response.status_code == 201, response.text
        assert response.json()["next_run_at"] is not None
        stack.delete(f"/v1/plans/{response.json()['id']}")


def test_dates_at_the_calendars_ends_are_422(stack: Stack, volume: str) -> None:
    plan = stack.post("/v1/plans", plan_body(volume, cron="0 2 * * *")).json()
    try:
        for after in ("9999-12-31T23:00:00Z", "0001-01-01T00:00:00Z",
                      "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
            err = refused_quickly(lambda a=after: stack.get(  # type: ignore[misc]
                f"/v1/plans/{plan['id']}/next-runs", after=a))
            assert "after" in err["message"]
    finally:
        stack.delete(f"/v1/plans/{plan['id']}")
    for since in ("9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"):
        assert "since" in error_of(stack.get("/v1/jobs", since=since), 422)["message"]


def test_numbers_over_the_columns_are_422(stack: Stack, volume: str) -> None:
    for field, value in (("qos_bytes_per_second", 10**19), ("qos_ops_per_second", 3 * 10**9),
                         ("qos_bytes_per_second", 1), ("qos_ops_per_second", 0)):
        err = error_of(stack.post("/v1/backups", {"volume": volume, field: value}), 422)
        assert field in err["message"]
        err = error_of(stack.post("/v1/plans", {**plan_body(volume, cron="0 2 * * *"),
                                                 field: value}), 422)
        assert field in err["message"]
    err = error_of(stack.client.put("/v1/quotas/project-a", json={"gigabytes": 10**30},
                                    headers=CLOUD_ADMIN), 422)
    assert "gigabytes" in err["message"]


def test_headers_and_ids_are_bounded(stack: Stack) -> None:
    err = error_of(stack.get("/v1/plans", headers={"X-Project-Id": "p" * 65}), 422)
    assert "X-Project-Id" in err["message"] or "x-project-id" in err["message"]
    err = error_of(stack.get("/v1/plans", headers={"X-Project-Id": "a b"}), 422)
    assert "x-project-id" in err["message"].lower()
    for path in ("/v1/plans/a%00b", "/v1/restore-points/" + "9" * 4000, "/v1/jobs/%0a"):
        error_of(stack.get(path), 422)
    error_of(stack.get("/v1/plans", marker="\x00"), 422)
    error_of(stack.get("/v1/jobs", volume="ceph-a/volumes/\x00"), 422)


def test_restore_to_a_missing_pool_or_a_bad_name_is_422(
        stack: Stack, volumes_pool: rados.Ioctx) -> None:
    name = ceph.unique_name("hostile-rp")
    rbd.RBD().create(volumes_pool, name, 4 * MiB)
    try:
        job = stack.wait_job(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}"})
                             .json()["id"])
        rp = job["restore_point_id"]
        jobs_before = len(stack.get("/v1/jobs", limit=1000).json()["jobs"])
        err = error_of(stack.post(f"/v1/restore-points/{rp}/restore",
                                  {"target": "ceph-a/no-such-pool/x"}), 422)
        assert "no-such-pool" in err["message"]
        for target in ("bad\nname", "x@snap", "a/b/c/d", "with space"):
            err = error_of(stack.post(f"/v1/restore-points/{rp}/restore", {"target": target}),
                           422)
            assert "target" in err["message"]
        err = error_of(stack.post(f"/v1/restore-points/{rp}/restore",
                                  {"new_volume": {"name": "two\nlines"}}), 422)
        assert "control characters" in err["message"]
        # Nothing was queued for the refused restores.
        assert len(stack.get("/v1/jobs", limit=1000).json()["jobs"]) == jobs_before
    finally:
        ceph.remove_image(volumes_pool, name)


def test_null_for_a_field_a_plan_always_has_is_422(stack: Stack, volume: str) -> None:
    plan = stack.post("/v1/plans", plan_body(volume, cron="0 2 * * *")).json()
    try:
        for field in ("name", "volumes", "rules", "timezone", "retention", "verify"):
            # Before, a null name reached the database's NOT NULL and answered 500.
            err = error_of(stack.client.patch(f"/v1/plans/{plan['id']}", json={field: None},
                                              headers={"X-Project-Id": "project-a"}), 422)
            assert f"{field} cannot be null" in err["message"]
        assert stack.get(f"/v1/plans/{plan['id']}").json()["name"] == plan["name"]
        # Clearing an optional field with null still works.
        cleared = stack.client.patch(f"/v1/plans/{plan['id']}", json={"window": None},
                                     headers={"X-Project-Id": "project-a"})
        assert cleared.status_code == 200, cleared.text
    finally:
        stack.delete(f"/v1/plans/{plan['id']}")


@pytest.mark.production_database_only
@pytest.mark.parametrize("char", ["\n", "\x1b", "\x85", "\u2028", "\u202e", "\u2067",
                                  "\u200b", "\ufeff", "\U000e0041"])
def test_names_and_descriptions_refuse_control_bidi_and_invisible_characters(
        stack: Stack, volume: str, char: str) -> None:
    """Every free-text field a tenant sets refuses them with 422 naming the field; nothing
    is stored (docs/security.md)."""
    hostile = f"night{char}ly"
    plan = stack.post("/v1/plans", plan_body(volume, cron="0 2 * * *")).json()
    rp = str(uuid.uuid4())  # the body is refused before the restore point is looked up
    try:
        for method, path, body, field in (
                ("POST", "/v1/plans", {**plan_body(volume, cron="0 2 * * *"),
                                       "name": hostile}, "name"),
                ("POST", "/v1/plans", {**plan_body(volume, cron="0 2 * * *"),
                                       "description": hostile}, "description"),
                ("PATCH", f"/v1/plans/{plan['id']}", {"name": hostile}, "name"),
                ("PATCH", f"/v1/plans/{plan['id']}", {"description": hostile}, "description"),
                ("POST", f"/v1/restore-points/{rp}/restore",
                 {"new_volume": {"name": "restored", "description": hostile}},
                 "new_volume.description"),
                ("POST", f"/v1/restore-points/{rp}/restore",
                 {"new_volume": {"name": "restored", "volume_type": hostile}},
                 "new_volume.volume_type"),
                ("POST", "/v1/backups", {"volume": volume, "target": hostile}, "target")):
            err = refused_quickly(lambda m=method, p=path, b=body: stack.client.request(  # type: ignore[misc]
                m, p, json=b, headers={"X-Project-Id": "project-a"}))
            assert err["message"].startswith(f"{field}: must not contain control characters"), \
                (path, body, err)
        names = {p["name"] for p in stack.get("/v1/plans", limit=1000).json()["plans"]}
        assert hostile not in names
        assert stack.get(f"/v1/plans/{plan['id']}").json()["name"] == plan["name"]
    finally:
        stack.delete(f"/v1/plans/{plan['id']}")


@pytest.mark.production_database_only
def test_a_lone_surrogate_is_422_not_a_server_error(stack: Stack, volume: str) -> None:
    # JSON may escape half of a surrogate pair; Python's json module decodes it into a
    # string no database or log can hold.
    body = json.dumps(plan_body(volume, cron="0 2 * * *")).replace(
        '"name": "hostile-', '"name": "\\ud800hostile-').encode()
    assert b"\\ud800" in body
    err = refused_quickly(lambda: stack.client.post(
        "/v1/plans", content=body, headers={"X-Project-Id": "project-a",
                                            "Content-Type": "application/json"}))
    assert err["message"].startswith("name:"), err


@pytest.mark.production_database_only
def test_cairns_own_names_are_refused_as_targets_and_volumes(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx) -> None:
    """Even the cloud's administrator, who may name RBD images, cannot name Cairn's own
    (`cairn.*`, `cairn-instant-*`, docs/adr/0005): a restore into one would overwrite or
    fake a restore point, a backup of one would snapshot Cairn's own image. 422, and
    nothing is overwritten, created or queued."""
    admin = {"X-Project-Id": "project-a", "X-Roles": "admin"}
    name = ceph.unique_name("reserved-src")
    rbd.RBD().create(volumes_pool, name, 4 * MiB)
    fresh = str(uuid.uuid4())
    made = {(volumes_pool, f"cairn.{fresh}"), (volumes_pool, f"cairn-instant-{fresh}"),
            (backups_pool, f"cairn.vol.{fresh}"), (volumes_pool, f"cairn.manifest.{fresh}")}
    rp: dict[str, Any] = {}
    try:
        with rbd.Image(volumes_pool, name) as image:
            image.write(b"source" * 1000, 0)
        job = stack.wait_job(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}"})
                             .json()["id"])
        assert job["status"] == "succeeded", job
        rp = stack.get(f"/v1/restore-points/{job['restore_point_id']}").json()
        kept = ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"])
        snaps = ceph.snapshots(backups_pool, rp["backup_image"])
        jobs = {j["id"] for j in stack.get("/v1/jobs", admin, limit=1000).json()["jobs"]}

        for target in (f"ceph-a/backups/cairn.vol.{fresh}", f"ceph-a/volumes/cairn.{fresh}",
                       f"cairn-instant-{fresh}", f"volumes/cairn.manifest.{fresh}",
                       f"ceph-a/backups/{rp['backup_image']}"):
            for mode in ("copy", "instant"):
                err = error_of(stack.post(f"/v1/restore-points/{rp['id']}/restore",
                                          {"target": target, "mode": mode}, admin), 422)
                assert err["message"].startswith("target "), err
                assert "Cairn's own" in err["message"], err
        for volume in (f"ceph-a/backups/{rp['backup_image']}",
                       f"ceph-a/volumes/cairn-instant-{fresh}"):
            err = error_of(stack.post("/v1/backups", {"volume": volume}, admin), 422)
            assert "Cairn's own" in err["message"], err
            err = error_of(stack.post("/v1/plans", {**plan_body(volume, cron="0 2 * * *")},
                                      admin), 422)
            assert "Cairn's own" in err["message"], err

        assert ceph.snapshots(backups_pool, rp["backup_image"]) == snaps
        assert ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"]) == kept
        assert not [n for io, n in made if n in ceph.image_names(io)]
        assert {j["id"] for j in stack.get("/v1/jobs", admin, limit=1000).json()["jobs"]} == jobs
    finally:
        ceph.remove_image(volumes_pool, name)
        if rp:
            deleted = stack.delete(f"/v1/restore-points/{rp['id']}")
            if deleted.status_code == 202:  # else a restore the test failed to refuse runs
                stack.wait_job(deleted.json()["id"])
        for io, image in made:  # only if the refusal failed
            ceph.remove_image(io, image)
