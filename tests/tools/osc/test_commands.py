"""`openstack protection …` as a user runs it, in Debian's python-openstackclient, against a
stand-in for Cairn's API: the commands osc lists, each command's output columns, what each
asks of which route, tables a person reads (sizes in GiB, escaped control characters)
while `-f json` keeps the API's values, `--wait`, and Cairn found in the catalog by its
service type or at the endpoint override."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tools.osc.conftest import CAIRN, Case, Session, needs_osc, run_all

pytestmark = needs_osc

VOLUME = "9a8b7c6d-1e2f-4a5b-8c7d-6e5f4a3b2c1d"
PLAN = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"
JOB = "7c8d9e0f-1a2b-4c3d-8e4f-5a6b7c8d9e0f"
RP = "3f2b8c1e-5d6a-4e7f-8a9b-0c1d2e3f4a5b"
HOOK = "1f0e4c5a-6b1d-4a53-9c9e-0d6b2f3a7e21"
PROJECT = "0b1c2d3e4f5a4b6c8d7e9f0a1b2c3d4e"

POINT = {"id": RP, "volume": VOLUME, "kind": "full", "status": "available",
         "size_bytes": 1073741824, "bytes_copied": 52428800, "duration_seconds": 0.312,
         "created_at": "2026-11-27T06:00:00Z", "locked_until": None}
JOB_BODY = {"id": JOB, "kind": "backup", "status": "running", "volume": VOLUME,
            "progress": {"percent": 40.0, "rate_bytes_per_second": 59012841.66899488},
            "timings": {"created_at": "2026-11-27T06:00:00Z", "duration_seconds": 0.3},
            "restore_point_id": None, "error": None}
DONE = {**JOB_BODY, "status": "succeeded", "restore_point_id": RP,
        "progress": {"percent": 100.0, "rate_bytes_per_second": 1.0}}
PLAN_BODY = {"id": PLAN, "name": "nightly", "status": "active", "volumes": [VOLUME],
             "next_run_at": "2026-11-28T02:00:00Z", "enabled": True,
             "retention": {"keep_last": 3, "daily": 7}, "verify": None, "offsite": None}
HOOK_BODY = {"id": HOOK, "url": "https://hooks.example.com/c", "event_types": [],
             "enabled": True, "disabled_reason": None}
VOLUME_BODY = {"id": VOLUME, "name": "demo", "size_gb": 1, "status": "available",
               "protected": True, "plans": [{"id": PLAN, "name": "nightly"}],
               "restore_points": 1, "newest_restore_point": {"created_at": "2026-11-27"}}
QUOTA = {"project_id": PROJECT, "limits": {"restore_points": None, "gigabytes": 500.0},
         "usage": {"restore_points": 3, "bytes_stored": 3221225472}}


def ok(body: Any) -> tuple[int, Any]:
    return 200, body


def page(key: str, *rows: Any) -> tuple[int, Any]:
    return 200, {key: list(rows), "next_marker": None}


DEMO = {"/v1/volumes": page("volumes", VOLUME_BODY)}
"""The project has one volume named demo."""

LISTS: dict[str, tuple[list[str], dict[str, Any], list[str]]] = {
    "plan list": (["plan", "list"], {"/v1/plans": page("plans", PLAN_BODY)},
                  ["ID", "Name", "Status", "Volumes", "Next run"]),
    "plan run": (["plan", "run", PLAN, "--full", "--wait"],
                 {f"/v1/plans/{PLAN}/run": ok({"jobs": [JOB_BODY], "skipped": []}),
                  f"/v1/jobs/{JOB}": ok(DONE)},
                 ["ID", "Kind", "Status", "Volume", "Progress", "Rate", "Duration", "Created"]),
    "restore point list": (["restore", "point", "list", "--volume", "demo"],
                           {**DEMO, "/v1/restore-points": page("restore_points", POINT)},
                           ["ID", "Volume", "Kind", "Status", "Size", "Copied", "Took",
                            "Created"]),
    "job list": (["job", "list"], {"/v1/jobs": page("jobs", JOB_BODY)},
                 ["ID", "Kind", "Status", "Volume", "Progress", "Rate", "Duration",
                  "Created"]),
    "webhook list": (["webhook", "list"], {"/v1/webhooks": ok({"webhooks": [HOOK_BODY]})},
                     ["ID", "URL", "Events", "Enabled", "Disabled because"]),
    "volume list": (["volume", "list"], DEMO,
                    ["ID", "Name", "Size (GiB)", "Status", "Protected", "Plans",
                     "Restore points", "Newest restore point"]),
    "target list": (["target", "list"], {"/v1/targets": ok({"targets": [
        {"name": "local", "kind": "rbd", "default": True, "max_jobs": 4}]})},
                    ["Name", "Kind", "Default", "Jobs at once"]),
}

SHOWS: dict[str, tuple[list[str], dict[str, Any], Any]] = {
    "plan show": (["plan", "show", PLAN], {f"/v1/plans/{PLAN}": ok(PLAN_BODY)}, PLAN_BODY),
    "plan create": (["plan", "create", "nightly", "--volume", "demo", "--incremental",
                     "0 2 * * *", "--keep-last", "3"],
                    {**DEMO, "POST /v1/plans": (201, PLAN_BODY)}, PLAN_BODY),
    "plan set": (["plan", "set", PLAN, "--keep-daily", "14"],
                 {f"GET /v1/plans/{PLAN}": ok(PLAN_BODY), f"PATCH /v1/plans/{PLAN}": ok(
                     PLAN_BODY)}, PLAN_BODY),
    "plan pause": (["plan", "pause", PLAN], {f"/v1/plans/{PLAN}/pause": ok(PLAN_BODY)},
                   PLAN_BODY),
    "plan resume": (["plan", "resume", PLAN], {f"/v1/plans/{PLAN}/resume": ok(PLAN_BODY)},
                    PLAN_BODY),
    "backup create": (["backup", "create", "demo", "--full", "--wait"],
                      {**DEMO, "/v1/backups": (202, JOB_BODY), f"/v1/jobs/{JOB}": ok(DONE)},
                      DONE),
    "restore point show": (["restore", "point", "show", RP],
                           {f"/v1/restore-points/{RP}": ok(POINT)}, POINT),
    "restore point delete": (["restore", "point", "delete", RP],
                             {f"/v1/restore-points/{RP}": (202, JOB_BODY)}, JOB_BODY),
    "restore point verify": (["restore", "point", "verify", RP, "--sample", "0.05"],
                             {f"/v1/restore-points/{RP}/verify": (202, JOB_BODY)}, JOB_BODY),
    "restore point copy": (["restore", "point", "copy", RP, "--target", "s3"],
                           {f"/v1/restore-points/{RP}/copy": (202, JOB_BODY)}, JOB_BODY),
    "restore point restore": (["restore", "point", "restore", RP, "--new-volume", "back",
                               "--wait"],
                              {f"/v1/restore-points/{RP}/restore": (202, JOB_BODY),
                               f"/v1/jobs/{JOB}": ok(DONE)}, DONE),
    "restore point lock": (["restore", "point", "lock", RP, "--until", "2099-01-01T00:00:00Z"],
                           {f"/v1/restore-points/{RP}": ok(POINT)}, POINT),
    "restore point unlock": (["restore", "point", "unlock", RP],
                             {f"/v1/restore-points/{RP}": ok(POINT)}, POINT),
    "job show": (["job", "show", JOB], {f"/v1/jobs/{JOB}": ok(JOB_BODY)}, JOB_BODY),
    "job set": (["job", "set", JOB, "--qos-bytes-per-second", "none"],
                {f"/v1/jobs/{JOB}": ok(JOB_BODY)}, JOB_BODY),
    "job cancel": (["job", "cancel", JOB], {f"/v1/jobs/{JOB}/cancel": ok(JOB_BODY)}, JOB_BODY),
    "webhook show": (["webhook", "show", HOOK], {f"/v1/webhooks/{HOOK}": ok(HOOK_BODY)},
                     HOOK_BODY),
    "webhook create": (["webhook", "create", "https://hooks.example.com/c", "--event",
                        "backup.create.error"], {"/v1/webhooks": (201, HOOK_BODY)}, HOOK_BODY),
    "webhook set": (["webhook", "set", HOOK, "--disable"],
                    {f"/v1/webhooks/{HOOK}": ok(HOOK_BODY)}, HOOK_BODY),
    "volume show": (["volume", "show", "demo"],
                    {**DEMO, f"/v1/volumes/{VOLUME}": ok(VOLUME_BODY)}, VOLUME_BODY),
    "usage show": (["usage", "show"], {"/v1/usage": ok(QUOTA)}, QUOTA),
    "quota show": (["quota", "show", PROJECT], {f"/v1/quotas/{PROJECT}": ok(QUOTA)}, QUOTA),
    "quota set": (["quota", "set", PROJECT, "--restore-points", "100"],
                  {f"/v1/quotas/{PROJECT}": ok(QUOTA)}, QUOTA),
}

SILENT: dict[str, tuple[list[str], dict[str, Any]]] = {
    "plan delete": (["plan", "delete", PLAN], {f"/v1/plans/{PLAN}": (204, None)}),
    "webhook delete": (["webhook", "delete", HOOK], {f"/v1/webhooks/{HOOK}": (204, None)}),
}

OTHERS: dict[str, Case] = {
    "rp table": Case(["protection", "restore", "point", "list", "--volume", VOLUME],
                     {"/v1/restore-points": page("restore_points", {
                         **POINT, "volume": "demo\x1b]0;owned\x07"})}),
    "rp sizes as values": Case(["protection", "restore", "point", "list", "-f", "value",
                                "-c", "Size", "-c", "Took"],
                               {"/v1/restore-points": page("restore_points", POINT)}),
    "show table": Case(["protection", "restore", "point", "show", RP],
                       {f"/v1/restore-points/{RP}": ok(POINT)}),
    "failed wait": Case(["protection", "backup", "create", VOLUME, "--wait", "-f", "json"],
                        {"/v1/backups": (202, JOB_BODY), f"/v1/jobs/{JOB}": ok({
                            **JOB_BODY, "status": "failed",
                            "error": {"message": "the target is down"}})}),
    "refused": Case(["protection", "plan", "show", PLAN], {f"/v1/plans/{PLAN}": (404, {
        "error": {"code": "plan_not_found", "message": f"plan {PLAN} not found"}})}),
    "unknown name": Case(["protection", "backup", "create", "nothing"],
                         {"/v1/volumes": page("volumes")}),
    "catalog": Case(["--os-region-name", "R1", "protection", "target", "list"],
                    {"/v1/targets": ok({"targets": []})}, endpoint=False),
    "below minimum": Case(["protection", "job", "set", JOB, "--qos-bytes-per-second", "5"]),
}


@pytest.fixture(scope="module")
def osc(tmp_path_factory: pytest.TempPathFactory) -> Session:
    cases = {**{name: Case(["protection", *argv, "-f", "json"], routes)
                for name, (argv, routes, _) in LISTS.items()},
             **{name: Case(["protection", *argv, "-f", "json"], routes)
                for name, (argv, routes, _) in SHOWS.items()},
             **{name: Case(["protection", *argv], routes)
                for name, (argv, routes) in SILENT.items()},
             **OTHERS}
    return run_all(cases, tmp_path_factory.mktemp("osc"))


def test_osc_lists_every_command(osc: Session) -> None:
    assert sorted(osc.commands) == sorted(f"protection {name}" for name in
                                          [*LISTS, *SHOWS, *SILENT])


@pytest.mark.parametrize("name", LISTS)
def test_a_list_has_its_columns(osc: Session, name: str) -> None:
    rows = osc.ran[name].json()
    assert rows
    assert [list(row) for row in rows] == [LISTS[name][2]] * len(rows)


@pytest.mark.parametrize("name", SHOWS)
def test_a_show_answers_the_api_object_under_its_own_names(osc: Session, name: str) -> None:
    assert osc.ran[name].json() == SHOWS[name][2]


@pytest.mark.parametrize("name", SILENT)
def test_a_delete_prints_nothing(osc: Session, name: str) -> None:
    ran = osc.ran[name]
    assert (ran.code, ran.out) == (0, "")
    assert [s["method"] for s in ran.sent] == ["DELETE"]


def test_what_each_command_asks(osc: Session) -> None:
    def asked(name: str) -> list[tuple[str, str, Any, Any]]:
        return [(s["method"], s["path"], s["params"], s["json"]) for s in osc.ran[name].sent]

    # A volume named as `openstack volume show` takes it, looked up first.
    assert asked("restore point list") == [
        ("GET", "/v1/volumes", {"name": "demo", "limit": 1000}, None),
        ("GET", "/v1/restore-points", {"volume": VOLUME, "limit": 1000}, None)]
    assert asked("backup create")[1:] == [
        ("POST", "/v1/backups", {}, {"volume": VOLUME, "kind": "full"}),
        ("GET", f"/v1/jobs/{JOB}", {}, None)]
    assert asked("plan create")[1] == ("POST", "/v1/plans", {}, {
        "name": "nightly", "volumes": [VOLUME], "rules": [{"cron": "0 2 * * *",
                                                             "kind": "incremental"}],
        "retention": {"keep_last": 3}})
    # One retention number changed, the plan's others kept.
    assert asked("plan set")[1] == ("PATCH", f"/v1/plans/{PLAN}", {}, {
        "retention": {"keep_last": 3, "daily": 14}})
    assert asked("restore point restore")[0][3] == {
        "mode": "copy", "new_volume": {"name": "back", "size_gb": None, "volume_type": None,
                                       "description": None}}
    assert asked("restore point verify")[0][3] == {"sample_fraction": 0.05}
    assert asked("restore point lock")[0][:2] == ("PATCH", f"/v1/restore-points/{RP}")
    assert asked("restore point unlock")[0][3] == {"locked_until": None}
    assert asked("job set")[0] == ("PATCH", f"/v1/jobs/{JOB}", {},
                                   {"qos_bytes_per_second": None})  # none: no limit
    assert asked("webhook set")[0][3] == {"enabled": False}
    assert asked("quota set")[1] == ("PUT", f"/v1/quotas/{PROJECT}", {}, {
        "restore_points": 100, "gigabytes": 500.0})


def test_a_table_reads_as_a_person_reads_it_and_values_keep_the_api_numbers(
        osc: Session) -> None:
    table = osc.ran["rp table"].out
    assert "| 1.0 GiB " in table
    assert "| 50.0 MiB " in table
    assert "| 0.3 s " in table
    assert "1073741824" not in table
    # Another system's text: its escape sequence shown, never sent to the terminal.
    assert "\x1b" not in table
    assert "demo\\x1b]0;owned\\x07" in table
    assert osc.ran["rp sizes as values"].out.split() == ["1073741824", "0.312"]
    shown = osc.ran["show table"].out
    assert "| size_bytes " in shown
    assert "1.0 GiB" in shown


def test_a_job_followed_to_a_failure_is_shown_then_exits_1(osc: Session) -> None:
    ran = osc.ran["failed wait"]
    assert ran.code == 1
    assert '"status": "failed"' in ran.out
    assert f"job {JOB} failed: the target is down" in ran.err


def test_the_apis_refusal_is_its_message_and_exit_1(osc: Session) -> None:
    assert osc.ran["refused"].code == 1
    assert f"plan {PLAN} not found" in osc.ran["refused"].err
    unknown = osc.ran["unknown name"]
    assert unknown.code == 1
    assert "no volume named 'nothing' in your project" in unknown.err
    assert [s["path"] for s in unknown.sent] == ["/v1/volumes"]


def test_cairn_is_found_by_its_service_type_or_at_the_endpoint_override(
        osc: Session) -> None:
    [sent] = osc.ran["catalog"].sent
    assert osc.ran["catalog"].code == 0, osc.ran["catalog"].err
    assert sent["endpoint"] is None
    assert sent["endpoint_filter"] == {"service_type": "volume-backup", "interface": "public",
                                       "region_name": "R1"}
    assert osc.ran["target list"].sent[0]["endpoint"] == CAIRN


def test_a_limit_below_the_minimum_is_a_usage_error(osc: Session) -> None:
    ran = osc.ran["below minimum"]
    assert ran.code == 2
    assert "5 is below 1048576" in ran.err
    assert ran.sent == []
