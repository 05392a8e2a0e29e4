"""`cairn` against a stand-in for the API: what each command asks of which route, what it
prints for a person (sizes, rates and durations readable) and for a script (`-f json`:
the API's exact numbers), and a volume named as `openstack volume show` takes it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.cli.standin import FakeSession, answer, cairn

VOLUME = "9a8b7c6d-1e2f-4a5b-8c7d-6e5f4a3b2c1d"
OTHER = "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"
PLAN = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"
JOB = "7c8d9e0f-1a2b-4c3d-8e4f-5a6b7c8d9e0f"
RP = "3f2b8c1e-5d6a-4e7f-8a9b-0c1d2e3f4a5b"
GROUP = "1f0e4c5a-6b1d-4a53-9c9e-0d6b2f3a7e21"

POINT = {"id": RP, "volume": "ceph-a/volumes/volume-x", "kind": "full", "status": "available",
         "size_bytes": 1073741824, "bytes_copied": 52428800, "duration_seconds": 0.312,
         "created_at": "2026-11-27T06:00:00Z", "group_id": None, "plan_id": None}
JOB_BODY = {"id": JOB, "kind": "backup", "status": "running", "volume": "ceph-a/volumes/v",
            "progress": {"percent": 40.0, "rate_bytes_per_second": 59012841.66899488},
            "timings": {"created_at": "2026-11-27T06:00:00Z", "duration_seconds": 0.3},
            "qos": {"bytes_per_second": None, "ops_per_second": None}}


def volumes_named(*ids: str) -> Any:
    return lambda params: answer(200, {"volumes": [
        {"id": i, "name": params.get("name")} for i in ids], "next_marker": None})


def test_a_volume_named_as_openstack_takes_it_lists_its_restore_points(
        session: FakeSession) -> None:
    session.routes["/v1/volumes"] = volumes_named(VOLUME)
    session.routes["/v1/restore-points"] = lambda params: answer(
        200, {"restore_points": [POINT], "next_marker": None})

    done = cairn("restore-point", "list", "--volume", "demo")
    assert done.code == 0, done.err
    assert [(s.path, s.params) for s in session.sent] == [
        ("/v1/volumes", {"name": "demo", "limit": 1000}),
        ("/v1/restore-points", {"volume": VOLUME, "limit": 1000})]
    table = done.out.decode()
    assert "| 1.0 GiB " in table
    assert "| 50.0 MiB " in table
    assert "| 0.3 s " in table
    assert "1073741824" not in table

    # An id (or an RBD image) goes to the API as it is, without a lookup.
    scripted = cairn("restore-point", "list", "--volume", VOLUME, "-f", "json")
    assert scripted.code == 0, scripted.err
    assert session.sent[-1].params == {"volume": VOLUME, "limit": 1000}
    assert session.sent[-2].path == "/v1/restore-points"
    point = json.loads(scripted.out)["restore_points"][0]
    assert (point["size_bytes"], point["duration_seconds"]) == (1073741824, 0.312)


@pytest.mark.parametrize(("ids", "said"), [
    ((), "cairn: no volume named 'demo' in your project"),
    ((VOLUME, OTHER), f"cairn: 2 volumes are named 'demo': give the id of the one you mean "
                      f"({VOLUME}, {OTHER})"),
])
def test_a_name_no_volume_or_several_have_is_refused_before_anything_else(
        session: FakeSession, ids: tuple[str, ...], said: str) -> None:
    session.routes["/v1/volumes"] = volumes_named(*ids)
    for command in (["restore-point", "list", "--volume", "demo"], ["backup", "create", "demo"],
                    ["job", "list", "--volume", "demo"]):
        done = cairn(*command)
        assert done.code == 1
        assert done.err.startswith(said)
    assert {s.path for s in session.sent} == {"/v1/volumes"}


def test_rates_and_durations_in_the_job_table(session: FakeSession) -> None:
    session.routes["/v1/jobs"] = lambda params: answer(200, {"jobs": [JOB_BODY],
                                                            "next_marker": None})
    done = cairn("job", "list")
    assert done.code == 0, done.err
    assert "| 56.3 MiB/s " in done.out.decode()
    assert "| 0.3 s " in done.out.decode()
    assert "59012841" not in done.out.decode()

    session.routes[f"/v1/jobs/{JOB}"] = lambda params: answer(200, JOB_BODY)
    shown = cairn("job", "show", JOB)
    assert "| progress.rate_bytes_per_second | 56.3 MiB/s " in shown.out.decode()
    assert "| timings.duration_seconds       | 0.3 s " in shown.out.decode()
    exact = json.loads(cairn("job", "show", JOB, "-f", "json").out)
    assert exact["progress"]["rate_bytes_per_second"] == 59012841.66899488


def test_job_set_changes_a_running_jobs_qos_and_none_removes_a_limit(
        session: FakeSession) -> None:
    session.routes[f"/v1/jobs/{JOB}"] = lambda params: answer(200, JOB_BODY)
    done = cairn("job", "set", JOB, "--qos-bytes-per-second", "10485760",
                 "--qos-ops-per-second", "none")
    assert done.code == 0, done.err
    assert (session.sent[-1].method, session.sent[-1].json) == (
        "PATCH", {"qos_bytes_per_second": 10485760, "qos_ops_per_second": None})

    for wrong in (["--qos-bytes-per-second", "1000"], ["--qos-ops-per-second", "fast"], []):
        refused = cairn("job", "set", JOB, *wrong)
        assert refused.code == 2, refused.err
    assert len(session.sent) == 1


def test_plan_update_sends_only_what_changes_keeping_the_plans_other_numbers(
        session: FakeSession) -> None:
    plan = {"id": PLAN, "name": "app", "volumes": [VOLUME],
            "retention": {"keep_last": 7, "daily": 7, "weekly": 4, "monthly": 0, "yearly": 0},
            "verify": {"full_every_days": 30, "sampled_every_days": 7,
                       "sample_fraction": 0.05},
            "offsite": {"target": "s3", "every": "week", "retention": None}}
    session.routes[f"GET /v1/plans/{PLAN}"] = lambda params: answer(200, plan)
    session.routes[f"PATCH /v1/plans/{PLAN}"] = lambda params: answer(200, plan)
    session.routes["/v1/volumes"] = volumes_named(OTHER)
    done = cairn("plan", "update", PLAN, "--keep-monthly", "12", "--window", "22:00-06:00",
                 "--qos-bytes-per-second", "none", "--volume", "db", "--offsite-every", "month",
                 "--verify-sample-fraction", "0.1", "--name", "app2", "--rrule",
                 "full;2026-01-03T02:00;FREQ=MONTHLY")
    assert done.code == 0, done.err
    assert session.sent[-1].json == {
        "name": "app2", "volumes": [OTHER], "window": {"start": "22:00", "end": "06:00"},
        "qos_bytes_per_second": None,
        "rules": [{"rrule": "FREQ=MONTHLY", "start": "2026-01-03T02:00", "kind": "full"}],
        "retention": {"keep_last": 7, "daily": 7, "weekly": 4, "monthly": 12, "yearly": 0},
        "verify": {"full_every_days": 30, "sampled_every_days": 7, "sample_fraction": 0.1},
        "offsite": {"target": "s3", "every": "month", "retention": None}}

    stop = cairn("plan", "update", PLAN, "--no-offsite", "--cinder-group", "none")
    assert stop.code == 0, stop.err
    assert session.sent[-1].json == {"offsite": None, "cinder_group": None}
    nothing = cairn("plan", "update", PLAN)
    assert nothing.code == 2
    assert "nothing to change" in nothing.err


def test_qos_on_backup_restore_verify_and_copy(session: FakeSession) -> None:
    session.routes["/v1/backups"] = lambda params: answer(202, JOB_BODY)
    for route in ("restore", "verify", "copy"):
        session.routes[f"/v1/restore-points/{RP}/{route}"] = lambda params: answer(202, JOB_BODY)
    qos = ["--qos-bytes-per-second", "52428800", "--qos-ops-per-second", "200"]
    limits = {"qos_bytes_per_second": 52428800, "qos_ops_per_second": 200}
    for command, body in [
            (["backup", "create", VOLUME, "--full"], {"volume": VOLUME, "kind": "full"}),
            (["restore", "create", RP, "--image", "volumes/restored", "--instant"],
             {"target": "volumes/restored", "mode": "instant"}),
            (["restore", "create", RP, "--new-volume", "back", "--size", "2"],
             {"new_volume": {"name": "back", "size_gb": 2, "volume_type": None,
                             "description": None}, "mode": "copy"}),
            (["restore-point", "verify", RP, "--sample", "0.1"], {"sample_fraction": 0.1}),
            (["restore-point", "copy", RP, "--target", "s3"], {"target": "s3"})]:
        done = cairn(*command, *qos)
        assert done.code == 0, done.err
        assert session.sent[-1].json == {**body, **limits}


def test_quota_set_keeps_the_limit_not_given_and_usage_reads_in_gib(
        session: FakeSession) -> None:
    project = "p" * 32
    quota = {"project_id": project, "limits": {"restore_points": 100, "gigabytes": 0.5},
             "usage": {"restore_points": 3, "gigabytes_stored": 0.25,
                       "bytes_stored": 268435456}}
    session.routes[f"/v1/quotas/{project}"] = lambda params: answer(200, quota)
    done = cairn("quota", "set", project, "--gigabytes", "none")
    assert done.code == 0, done.err
    assert (session.sent[-1].method, session.sent[-1].json) == (
        "PUT", {"restore_points": 100, "gigabytes": None})

    session.routes["/v1/usage"] = lambda params: answer(200, quota)
    usage = cairn("usage")
    assert usage.code == 0, usage.err
    assert "| storage        | 512.0 MiB | 256.0 MiB |" in usage.out.decode()
    assert json.loads(cairn("usage", "-f", "json").out)["usage"]["bytes_stored"] == 268435456


def test_restore_point_groups_listed_shown_and_restored(session: FakeSession) -> None:
    members = [{**POINT, "id": f"{i}" * 8 + RP[8:], "group_id": GROUP, "plan_id": PLAN}
               for i in (1, 2)]
    session.routes["/v1/restore-points"] = lambda params: answer(
        200, {"restore_points": [*members, POINT], "next_marker": None})
    listed = cairn("restore-point-group", "list", "--plan", PLAN, "-f", "json")
    assert listed.code == 0, listed.err
    assert session.sent[-1].params == {"plan_id": PLAN, "limit": 1000}
    [group] = json.loads(listed.out)["restore_point_groups"]
    assert (group["id"], group["complete"], len(group["restore_points"])) == (GROUP, True, 2)

    session.routes[f"/v1/restore-point-groups/{GROUP}"] = lambda params: answer(200, {
        "id": GROUP, "plan_id": PLAN, "complete": True, "restore_points": members,
        "taken_at": "2026-11-27T06:00:00Z"})
    shown = cairn("restore-point-group", "show", GROUP)
    assert shown.code == 0, shown.err
    assert shown.out.decode().count("1.0 GiB") == 2

    session.routes[f"/v1/restore-point-groups/{GROUP}/restore"] = lambda params: answer(
        202, {"jobs": [JOB_BODY, JOB_BODY], "next_marker": None})
    restored = cairn("restore-point-group", "restore", GROUP, "--name-prefix", "back-")
    assert restored.code == 0, restored.err
    assert session.sent[-1].json == {"in_place": False, "mode": "copy", "name_prefix": "back-"}
    assert cairn("restore-point-group", "restore", GROUP).code == 2


@pytest.mark.parametrize(("command", "route", "body", "shown"), [
    (["target", "list"], "/v1/targets",
     {"targets": [{"name": "ceph-b", "kind": "rbd", "default": True, "max_jobs": 4}]}, "ceph-b"),
    (["plan", "retention-preview", PLAN], f"/v1/plans/{PLAN}/retention-preview",
     {"restore_points": [{"restore_point_id": RP, "keep": False, "kept_by": []}]}, "prune"),
    (["plan", "next-runs", PLAN, "--after", "2026-12-01T00:00:00Z"],
     f"/v1/plans/{PLAN}/next-runs", {"runs": [{"at": "2026-12-01T02:00:00Z"}]},
     "2026-12-01T02:00:00Z"),
    (["restore-point", "days", "--volume", VOLUME], "/v1/restore-points/days",
     {"days": [{"date": "2026-11-27", "full": 1, "incremental": 3}]}, "2026-11-27"),
    (["volume", "show", VOLUME], f"/v1/volumes/{VOLUME}", {"id": VOLUME, "name": "demo"},
     "demo"),
    (["overview"], "/v1/overview", {"volumes": 3, "protected": 2, "unprotected": 1,
                                    "stale": [], "next_runs": []}, "protected: 2"),
    (["orphan", "list"], "/v1/orphans",
     {"findings": [{"action": "remove", "location": "ceph-a/backups/cairn.vol.x"}],
      "errors": [], "grace_seconds": 3600}, "cairn.vol.x"),
])
def test_what_the_api_offers_the_cli_asks_and_prints(
        session: FakeSession, command: list[str], route: str, body: dict[str, Any],
        shown: str) -> None:
    session.routes[route] = lambda params: answer(200, body)
    done = cairn(*command)
    assert done.code == 0, done.err
    assert session.sent[-1].path == route
    assert shown in done.out.decode()
    assert json.loads(cairn(*command, "-f", "json").out) == body
