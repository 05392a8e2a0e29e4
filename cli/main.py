"""`cairn`: volumes, plans, backups, restore points, restores and jobs from the shell.

Credentials come from clouds.yaml (`--os-cloud` / OS_CLOUD) or the OS_* variables, read by
keystoneauth1's loaders; Cairn's endpoint from the Keystone catalog. Errors print the API's
message and exit 1 (a job that ends failed with `--wait` too); usage errors exit 2.

This module is over 400 lines because it is the command tree of `cairn` and nothing else:
click's groups and commands, each a few lines that call one endpoint and print its answer,
read top to bottom as the CLI's table of contents; what they share is in `api.py`,
`output.py` and `progress.py`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from cli import progress
from cli.api import Api, ApiError
from cli.files import files
from cli.output import FORMAT, Column, emit, field, printable, show

WAIT = click.option("--wait", is_flag=True, help="Follow the job to its end with a progress bar")

JOB_COLUMNS: list[Column] = [
    ("ID", field("id")), ("Kind", field("kind")), ("Status", field("status")),
    ("Volume", field("volume")),
    ("Progress", lambda j: f"{(j.get('progress') or {}).get('percent') or 0:.0f}%"),
    ("Created", lambda j: (j.get("timings") or {}).get("created_at")),
]


class State:
    def __init__(self, cloud: str | None, endpoint: str | None) -> None:
        self.cloud = cloud
        self.endpoint = endpoint
        self._api: Api | None = None

    @property
    def api(self) -> Api:
        if self._api is None:
            self._api = Api.connect(self.cloud, self.endpoint)
        return self._api


pass_state = click.make_pass_decorator(State)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--os-cloud", envvar="OS_CLOUD", help="Cloud in clouds.yaml (default OS_CLOUD)")
@click.option("--os-endpoint", help="Cairn's URL, instead of the catalog's (or CAIRN_URL)")
@click.pass_context
def cli(ctx: click.Context, os_cloud: str | None, os_endpoint: str | None) -> None:
    """Cairn: backups of your Cinder volumes."""
    ctx.obj = State(os_cloud, os_endpoint)


def main(args: list[str] | None = None) -> None:
    try:
        cli.main(args=args, prog_name="cairn", standalone_mode=False)
    except ApiError as exc:
        click.echo(f"cairn: {printable(exc.message)}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("cairn: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)


def _finish_job(state: State, job: dict[str, Any], wait: bool, fmt: str) -> None:
    if wait:
        job = progress.wait(state.api, job["id"], bar=fmt != "json")
    show(job, fmt)
    if wait and job["status"] != "succeeded":
        error = job.get("error") or {}
        raise ApiError(f"job {job['id']} {job['status']}: {error.get('message', '')}")


# ------------------------------------------------------------------ volumes
@cli.group()
def volume() -> None:
    """Your project's Cinder volumes and their protection."""


@volume.command("list")
@FORMAT
@pass_state
def volume_list(state: State, fmt: str) -> None:
    volumes: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 1000}
    while True:
        data = state.api.call("GET", "/v1/volumes", params=params)
        volumes.extend(data["volumes"])
        if not data.get("next_marker"):
            break
        params["marker"] = data["next_marker"]
    data = {"volumes": volumes}
    emit(data, fmt, data["volumes"], [
        ("ID", field("id")), ("Name", field("name")), ("Size (GiB)", field("size_gb")),
        ("Status", field("status")), ("Protected", field("protected")),
        ("Plans", lambda v: ", ".join(p["name"] for p in v["plans"])),
        ("Newest restore point", lambda v: (v["newest_restore_point"] or {}).get("created_at")),
    ])


# ------------------------------------------------------------------ plans
@cli.group()
def plan() -> None:
    """Backup plans: volumes, schedule rules, window, retention."""


PLAN_COLUMNS: list[Column] = [
    ("ID", field("id")), ("Name", field("name")), ("Status", field("status")),
    ("Volumes", lambda p: len(p["volumes"])), ("Next run", field("next_run_at")),
]


@plan.command("list")
@FORMAT
@pass_state
def plan_list(state: State, fmt: str) -> None:
    data = state.api.call("GET", "/v1/plans", params={"limit": 1000})
    emit(data, fmt, data["plans"], PLAN_COLUMNS)


@plan.command("show")
@click.argument("plan_id")
@FORMAT
@pass_state
def plan_show(state: State, plan_id: str, fmt: str) -> None:
    show(state.api.call("GET", f"/v1/plans/{plan_id}"), fmt)


@plan.command("create")
@click.option("--name", required=True)
@click.option("--volume", "volumes", multiple=True,
              help="Cinder volume id (repeat for several)")
@click.option("--cinder-group", metavar="GROUP_ID",
              help="Instead of --volume: protect the volumes of this Cinder generic volume "
                   "group, following it as volumes join or leave it (crash-consistent "
                   "together, as with --group)")
@click.option("--incremental", "incrementals", multiple=True, metavar="CRON",
              help="Cron rule for incremental backups, e.g. '0 2 * * *' (repeatable)")
@click.option("--full", "fulls", multiple=True, metavar="CRON",
              help="Cron rule for full backups, e.g. '0 3 * * 0' (repeatable)")
@click.option("--timezone", default="UTC", show_default=True, help="IANA timezone of the rules")
@click.option("--window", help="Backup window HH:MM-HH:MM, e.g. 22:00-06:00")
@click.option("--keep-last", type=int, default=0)
@click.option("--keep-daily", type=int, default=0)
@click.option("--keep-weekly", type=int, default=0)
@click.option("--keep-monthly", type=int, default=0)
@click.option("--keep-yearly", type=int, default=0)
@click.option("--target", help="Backup target (default: the service's)")
@click.option("--group", "group", is_flag=True,
              help="Crash-consistent together: one RBD group snapshot over all the volumes "
                   "per run (an application spread over several volumes)")
@click.option("--offsite", metavar="TARGET",
              help="Copy restore points off site to this object target, from the backup pool")
@click.option("--offsite-every", type=click.Choice(["backup", "day", "week", "month"]),
              default="week", show_default=True,
              help="Copy the first restore point of each period (or every one)")
@click.option("--offsite-keep-last", type=int, default=None,
              help="Copies kept off site (default: the plan's retention)")
@FORMAT
@pass_state
def plan_create(state: State, name: str, volumes: tuple[str, ...], cinder_group: str | None,
                incrementals: tuple[str, ...], fulls: tuple[str, ...], timezone: str,
                window: str | None, keep_last: int, keep_daily: int, keep_weekly: int,
                keep_monthly: int, keep_yearly: int, target: str | None, group: bool,
                offsite: str | None, offsite_every: str, offsite_keep_last: int | None,
                fmt: str) -> None:
    rules = ([{"cron": c, "kind": "incremental"} for c in incrementals]
             + [{"cron": c, "kind": "full"} for c in fulls])
    if not rules:
        raise click.UsageError("give at least one --incremental or --full cron rule")
    if bool(volumes) == bool(cinder_group):
        raise click.UsageError("give the volumes (--volume, repeatable) or one --cinder-group")
    body: dict[str, Any] = {
        "name": name, "rules": rules, "timezone": timezone,
        "retention": {"keep_last": keep_last, "daily": keep_daily, "weekly": keep_weekly,
                      "monthly": keep_monthly, "yearly": keep_yearly}}
    if cinder_group:
        body["cinder_group"] = cinder_group
    else:
        body["volumes"] = list(volumes)
    if window:
        start, sep, end = window.partition("-")
        if not sep:
            raise click.UsageError("--window is HH:MM-HH:MM, e.g. 22:00-06:00")
        body["window"] = {"start": start, "end": end}
    if target:
        body["target"] = target
    if group:
        body["consistency"] = "group"
    if offsite:
        body["offsite"] = {"target": offsite, "every": offsite_every, "retention": None
                           if offsite_keep_last is None else {"keep_last": offsite_keep_last}}
    elif offsite_keep_last is not None:
        raise click.UsageError("--offsite-keep-last needs --offsite TARGET")
    show(state.api.call("POST", "/v1/plans", json=body), fmt)


@plan.command("delete")
@click.argument("plan_id")
@pass_state
def plan_delete(state: State, plan_id: str) -> None:
    state.api.call("DELETE", f"/v1/plans/{plan_id}")
    click.echo(f"plan {plan_id} deleted (its restore points stay)")


def _plan_action(name: str, doc: str) -> Callable[..., None]:
    @plan.command(name, help=doc)
    @click.argument("plan_id")
    @FORMAT
    @pass_state
    def command(state: State, plan_id: str, fmt: str) -> None:
        show(state.api.call("POST", f"/v1/plans/{plan_id}/{name}"), fmt)
    return command


_plan_action("pause", "Stop making new jobs for the plan.")
_plan_action("resume", "Continue the plan's schedule from the next slot.")


@plan.command("run")
@click.argument("plan_id")
@click.option("--full", is_flag=True, help="Full backups instead of the plan's next kind")
@WAIT
@FORMAT
@pass_state
def plan_run(state: State, plan_id: str, full: bool, wait: bool, fmt: str) -> None:
    """Back up every volume of the plan now."""
    body = {"kind": "full"} if full else {}
    result = state.api.call("POST", f"/v1/plans/{plan_id}/run", json=body)
    jobs = result["jobs"]
    if wait:
        jobs = [progress.wait(state.api, j["id"], bar=fmt != "json") for j in jobs]
        result["jobs"] = jobs
    emit(result, fmt, jobs, JOB_COLUMNS)
    failed = [j for j in jobs if wait and j["status"] != "succeeded"]
    if failed:
        raise ApiError(f"{len(failed)} of {len(jobs)} backups did not succeed: " + "; ".join(
            f"{j['id']}: {(j.get('error') or {}).get('message', j['status'])}" for j in failed))


@plan.command("next-runs")
@click.argument("plan_id")
@click.option("--count", type=int, default=10, show_default=True)
@FORMAT
@pass_state
def plan_next_runs(state: State, plan_id: str, count: int, fmt: str) -> None:
    data = state.api.call("GET", f"/v1/plans/{plan_id}/next-runs", params={"count": count})
    emit(data, fmt, data["runs"], [("UTC", field("at")), ("Local", field("local")),
                                   ("Kind", field("kind"))])


# ------------------------------------------------------------------ backups
@cli.group()
def backup() -> None:
    """On-demand backups."""


@backup.command("create")
@click.argument("volume_id")
@click.option("--full", is_flag=True, help="A full copy instead of an incremental")
@click.option("--target", help="Backup target (default: the service's)")
@WAIT
@FORMAT
@pass_state
def backup_create(state: State, volume_id: str, full: bool, target: str | None, wait: bool,
                  fmt: str) -> None:
    body: dict[str, Any] = {"volume": volume_id, "kind": "full" if full else "incremental"}
    if target:
        body["target"] = target
    _finish_job(state, state.api.call("POST", "/v1/backups", json=body), wait, fmt)


# ------------------------------------------------------------------ restore points
@cli.group("restore-point")
def restore_point() -> None:
    """Restore points (the copies)."""


@restore_point.command("list")
@click.option("--volume", help="Only this volume's (Cinder id)")
@click.option("--plan", "plan_id", help="Only this plan's")
@FORMAT
@pass_state
def restore_point_list(state: State, volume: str | None, plan_id: str | None, fmt: str) -> None:
    data = state.api.call("GET", "/v1/restore-points",
                          params={"volume": volume, "plan_id": plan_id, "limit": 1000})
    emit(data, fmt, data["restore_points"], [
        ("ID", field("id")), ("Volume", field("volume")), ("Kind", field("kind")),
        ("Status", field("status")), ("Size", field("size_bytes")),
        ("Created", field("created_at"))])


@restore_point.command("show")
@click.argument("rp_id")
@FORMAT
@pass_state
def restore_point_show(state: State, rp_id: str, fmt: str) -> None:
    show(state.api.call("GET", f"/v1/restore-points/{rp_id}"), fmt)


@restore_point.command("delete")
@click.argument("rp_id")
@WAIT
@FORMAT
@pass_state
def restore_point_delete(state: State, rp_id: str, wait: bool, fmt: str) -> None:
    _finish_job(state, state.api.call("DELETE", f"/v1/restore-points/{rp_id}"), wait, fmt)


@restore_point.command("verify")
@click.argument("rp_id")
@click.option("--sample", type=click.FloatRange(0, 1, min_open=True), metavar="FRACTION",
              help="Read only this fraction of the objects, chosen at random (e.g. 0.05)")
@WAIT
@FORMAT
@pass_state
def restore_point_verify(state: State, rp_id: str, sample: float | None, wait: bool,
                         fmt: str) -> None:
    """Re-read a restore point and compare it with its checksums."""
    body: dict[str, Any] = {} if sample is None else {"sample_fraction": sample}
    _finish_job(state, state.api.call("POST", f"/v1/restore-points/{rp_id}/verify",
                                      json=body), wait, fmt)


@restore_point.command("copy")
@click.argument("rp_id")
@click.option("--target", help="Object target to copy to (default: the service's)")
@WAIT
@FORMAT
@pass_state
def restore_point_copy(state: State, rp_id: str, target: str | None, wait: bool,
                       fmt: str) -> None:
    """Copy a restore point off site, to an object target, from the backup pool."""
    body: dict[str, Any] = {} if target is None else {"target": target}
    _finish_job(state, state.api.call("POST", f"/v1/restore-points/{rp_id}/copy",
                                      json=body), wait, fmt)


@restore_point.command("lock")
@click.argument("rp_id")
@click.option("--until", "until", metavar="TIME",
              help="ISO 8601 time with zone (e.g. 2027-12-31T00:00:00Z); omit to unlock "
                   "(administrators only, as is shortening a lock)")
@FORMAT
@pass_state
def restore_point_lock(state: State, rp_id: str, until: str | None, fmt: str) -> None:
    """Keep a restore point from retention and deletion until a time."""
    show(state.api.call("PATCH", f"/v1/restore-points/{rp_id}",
                        json={"locked_until": until}), fmt)


restore_point.add_command(files)


# ------------------------------------------------------------------ restores
@cli.group()
def restore() -> None:
    """Restores."""


@restore.command("create")
@click.argument("rp_id")
@click.option("--new-volume", metavar="NAME", help="Restore into a new Cinder volume")
@click.option("--size", type=int, help="Size in GiB of the new volume (default: the copy's)")
@click.option("--type", "volume_type", help="Volume type of the new volume")
@click.option("--volume", "volume_id", help="Restore in place over this detached volume")
@click.option("--instant", is_flag=True,
              help="Hand the new volume over within seconds (a clone of the backup), and "
                   "flatten it in the background; --wait waits for the flatten")
@WAIT
@FORMAT
@pass_state
def restore_create(state: State, rp_id: str, new_volume: str | None, size: int | None,
                   volume_type: str | None, volume_id: str | None, instant: bool, wait: bool,
                   fmt: str) -> None:
    if bool(new_volume) == bool(volume_id):
        raise click.UsageError("give exactly one of --new-volume NAME and --volume ID")
    if instant and volume_id:
        raise click.UsageError("--instant needs --new-volume: a restore in place is a copy")
    body: dict[str, Any] = {"volume_id": volume_id} if volume_id else {
        "new_volume": {"name": new_volume, "size_gb": size, "volume_type": volume_type}}
    if instant:
        body["mode"] = "instant"
    _finish_job(state, state.api.call("POST", f"/v1/restore-points/{rp_id}/restore",
                                      json=body), wait, fmt)


# ------------------------------------------------------------------ jobs
@cli.group()
def job() -> None:
    """Jobs: what ran, runs and waits."""


@job.command("list")
@click.option("--plan", "plan_id")
@click.option("--volume")
@click.option("--kind", type=click.Choice(["backup", "restore", "delete", "verify", "prune"]))
@click.option("--status", type=click.Choice(["queued", "running", "succeeded", "failed",
                                             "cancelled", "skipped"]))
@click.option("--limit", type=int, default=50, show_default=True)
@FORMAT
@pass_state
def job_list(state: State, plan_id: str | None, volume: str | None, kind: str | None,
             status: str | None, limit: int, fmt: str) -> None:
    data = state.api.call("GET", "/v1/jobs", params={
        "plan_id": plan_id, "volume": volume, "kind": kind, "status": status, "limit": limit})
    emit(data, fmt, data["jobs"], JOB_COLUMNS)


@job.command("show")
@click.argument("job_id")
@WAIT
@FORMAT
@pass_state
def job_show(state: State, job_id: str, wait: bool, fmt: str) -> None:
    _finish_job(state, state.api.call("GET", f"/v1/jobs/{job_id}"), wait, fmt)


@job.command("cancel")
@click.argument("job_id")
@FORMAT
@pass_state
def job_cancel(state: State, job_id: str, fmt: str) -> None:
    show(state.api.call("POST", f"/v1/jobs/{job_id}/cancel"), fmt)


# ------------------------------------------------------------------ webhooks
@cli.group()
def webhook() -> None:
    """Webhooks: hear about backups, restores and plans as signed CloudEvents."""


WEBHOOK_COLUMNS: list[Column] = [
    ("ID", field("id")), ("URL", lambda w: w.get("url") or w.get("url_host")),
    ("Events", lambda w: ", ".join(
        w["event_types"]) or "all"), ("Enabled", field("enabled")),
    ("Disabled because", field("disabled_reason")),
]


@webhook.command("create")
@click.argument("url")
@click.option("--event", "events", multiple=True,
              help="Event type, e.g. backup.create.error (repeat; default: every event)")
@click.option("--description")
@FORMAT
@pass_state
def webhook_create(state: State, url: str, events: tuple[str, ...], description: str | None,
                   fmt: str) -> None:
    """Create a webhook; prints its signing secret, which is not shown again."""
    show(state.api.call("POST", "/v1/webhooks", json={
        "url": url, "event_types": list(events), "description": description}), fmt)


@webhook.command("list")
@FORMAT
@pass_state
def webhook_list(state: State, fmt: str) -> None:
    data = state.api.call("GET", "/v1/webhooks")
    emit(data, fmt, data["webhooks"], WEBHOOK_COLUMNS)


@webhook.command("show")
@click.argument("webhook_id")
@FORMAT
@pass_state
def webhook_show(state: State, webhook_id: str, fmt: str) -> None:
    show(state.api.call("GET", f"/v1/webhooks/{webhook_id}"), fmt)


@webhook.command("set")
@click.argument("webhook_id")
@click.option("--url")
@click.option("--event", "events", multiple=True, help="Replace the event types (repeat)")
@click.option("--enable/--disable", default=None,
              help="Enable again (forgets past failures) or disable")
@FORMAT
@pass_state
def webhook_set(state: State, webhook_id: str, url: str | None, events: tuple[str, ...],
                enable: bool | None, fmt: str) -> None:
    change: dict[str, Any] = {"url": url, "enabled": enable,
                              "event_types": list(events) if events else None}
    show(state.api.call("PATCH", f"/v1/webhooks/{webhook_id}",
                        json={k: v for k, v in change.items() if v is not None}), fmt)


@webhook.command("delete")
@click.argument("webhook_id")
@pass_state
def webhook_delete(state: State, webhook_id: str) -> None:
    state.api.call("DELETE", f"/v1/webhooks/{webhook_id}")
    click.echo(f"webhook {webhook_id} deleted")


@webhook.command("rotate-secret")
@click.argument("webhook_id")
@FORMAT
@pass_state
def webhook_rotate(state: State, webhook_id: str, fmt: str) -> None:
    """A new secret; the old one keeps signing until `previous_expires_at`."""
    show(state.api.call("POST", f"/v1/webhooks/{webhook_id}/rotate-secret"), fmt)


@webhook.command("test")
@click.argument("webhook_id")
@FORMAT
@pass_state
def webhook_test(state: State, webhook_id: str, fmt: str) -> None:
    """Send a `webhook.test` event; see it arrive in `cairn webhook deliveries`."""
    show(state.api.call("POST", f"/v1/webhooks/{webhook_id}/test"), fmt)


@webhook.command("deliveries")
@click.argument("webhook_id")
@click.option("--limit", type=int, default=20, show_default=True)
@FORMAT
@pass_state
def webhook_deliveries(state: State, webhook_id: str, limit: int, fmt: str) -> None:
    data = state.api.call("GET", f"/v1/webhooks/{webhook_id}/deliveries",
                          params={"limit": limit})
    emit(data, fmt, data["deliveries"], [
        ("ID", field("id")), ("Event", field("event_type")), ("Status", field("status")),
        ("Attempts", field("attempts")), ("Answer", field("last_status_code")),
        ("Error", field("last_error")), ("Created", field("created_at"))])
