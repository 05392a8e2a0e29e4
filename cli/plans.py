"""`cairn plan`: backup plans (volumes, schedule rules, window, retention, verify, QoS,
off-site copies), their runs, and what their retention keeps.

`plan create` and `plan update` take the same options; `update` sends only what was given
(a retention or verify option changes that one number and keeps the plan's others)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from cairnclient.client import JSON, PlanFields
from cairnclient.http import ApiError
from cli import progress
from cli.context import JOB_COLUMNS, WAIT, State, given, limit, pass_state
from cli.output import FORMAT, Column, emit, field, show

F = TypeVar("F", bound=Callable[..., Any])

PLAN_COLUMNS: list[Column] = [
    ("ID", field("id")), ("Name", field("name")), ("Status", field("status")),
    ("Volumes", lambda p: len(p["volumes"])), ("Next run", field("next_run_at")),
]

KEEP = {"keep_last": "keep_last", "keep_daily": "daily", "keep_weekly": "weekly",
        "keep_monthly": "monthly", "keep_yearly": "yearly"}
"""--keep-* option (its parameter name) -> the retention field."""
VERIFY = {"verify_full_every_days": "full_every_days",
          "verify_sampled_every_days": "sampled_every_days",
          "verify_sample_fraction": "sample_fraction"}


def _options(*options: Callable[[F], F]) -> Callable[[F], F]:
    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command
    return decorate


SCHEDULE = _options(
    click.option("--incremental", "incrementals", multiple=True, metavar="CRON",
                 help="Cron rule for incremental backups, e.g. '0 2 * * *' (repeatable)"),
    click.option("--full", "fulls", multiple=True, metavar="CRON",
                 help="Cron rule for full backups, e.g. '0 3 * * 0' (repeatable)"),
    click.option("--rrule", "rrules", multiple=True, metavar="RRULE",
                 help="An RFC 5545 rule instead, with its start: "
                      "'KIND;DTSTART;RULE', e.g. 'full;2026-01-03T02:00;FREQ=MONTHLY'"),
    click.option("--timezone", help="IANA timezone of the rules (create: UTC)"),
    click.option("--window", help="Backup window HH:MM-HH:MM, e.g. 22:00-06:00"),
    *(click.option("--" + name.replace("_", "-"), name, type=click.IntRange(0),
                   help=f"Retention: {field_name.replace('_', ' ')}")
      for name, field_name in KEEP.items()),
)

SETTINGS = _options(
    click.option("--description"),
    click.option("--target", help="Backup target (default: the service's; `cairn target list`)"),
    click.option("--consistency", type=click.Choice(["volume", "group"]),
                 help="group: crash-consistent together, one RBD group snapshot over all the "
                      "volumes per run (an application spread over several volumes)"),
    click.option("--qos-bytes-per-second", callback=limit(1 << 20), metavar="BYTES",
                 help="Upper bound on each backup's read rate ('none': no limit)"),
    click.option("--qos-ops-per-second", callback=limit(1), metavar="N",
                 help="Upper bound on each backup's read operations/s ('none': no limit)"),
    click.option("--verify-full-every-days", type=click.FloatRange(0, 3660, min_open=True),
                 help="Verify every object of the newest restore point this often"),
    click.option("--verify-sampled-every-days", type=click.FloatRange(0, 3660, min_open=True),
                 help="A sampled verify this often"),
    click.option("--verify-sample-fraction", type=click.FloatRange(0, 1, min_open=True),
                 help="Share of the objects a sampled verify reads"),
    click.option("--offsite", metavar="TARGET",
                 help="Copy restore points off site to this object target, from the backup "
                      "pool"),
    click.option("--offsite-every", type=click.Choice(["backup", "day", "week", "month"]),
                 help="Copy the first restore point of each period, or every one (create: "
                      "week)"),
    click.option("--offsite-keep-last", type=click.IntRange(0),
                 help="Copies kept off site (default: the plan's retention)"),
)


def _rules(incrementals: tuple[str, ...], fulls: tuple[str, ...],
           rrules: tuple[str, ...]) -> list[JSON]:
    rules: list[JSON] = ([{"cron": c, "kind": "incremental"} for c in incrementals]
                         + [{"cron": c, "kind": "full"} for c in fulls])
    for text in rrules:
        kind, start, rule = [*text.split(";", 2), "", ""][:3]
        if kind not in ("full", "incremental") or not start or not rule:
            raise click.UsageError(f"--rrule {text!r}: give KIND;DTSTART;RULE, e.g. "
                                   "'full;2026-01-03T02:00;FREQ=MONTHLY'")
        rules.append({"rrule": rule, "start": start, "kind": kind})
    return rules


def _window(window: str) -> JSON | None:
    if window.lower() == "none":
        return None
    start, sep, end = window.partition("-")
    if not sep:
        raise click.UsageError("--window is HH:MM-HH:MM, e.g. 22:00-06:00 (or 'none')")
    return {"start": start, "end": end}


def _fields(given_options: dict[str, Any], current: JSON | None) -> PlanFields:
    """The plan fields the options give; `current` (the plan being updated) fills in the
    retention, verify and off-site numbers not given."""
    o = given_options
    out: dict[str, Any] = {}
    rules = _rules(o.pop("incrementals"), o.pop("fulls"), o.pop("rrules"))
    if rules:
        out["rules"] = rules
    for name in ("timezone", "description", "target", "consistency"):
        if o[name] is not None:
            out[name] = o[name]
    if o["window"] is not None:
        out["window"] = _window(o["window"])
    for name in ("qos_bytes_per_second", "qos_ops_per_second"):
        if o[name] is not None:
            out[name] = given(o[name])
    keep = {KEEP[k]: o[k] for k in KEEP if o[k] is not None}
    if keep or current is None:
        out["retention"] = {**((current or {}).get("retention") or {}), **keep}
    verify = {VERIFY[k]: o[k] for k in VERIFY if o[k] is not None}
    if verify:
        out["verify"] = {**((current or {}).get("verify") or {}), **verify}
    offsite = (current or {}).get("offsite") or {}
    if o["offsite"] or ((o["offsite_every"] or o["offsite_keep_last"] is not None)
                        and offsite):
        out["offsite"] = {
            "target": o["offsite"] or offsite["target"],
            "every": o["offsite_every"] or offsite.get("every") or "week",
            "retention": offsite.get("retention") if o["offsite_keep_last"] is None
            else {"keep_last": o["offsite_keep_last"]}}
    elif o["offsite_every"] or o["offsite_keep_last"] is not None:
        raise click.UsageError("--offsite-every and --offsite-keep-last need --offsite TARGET "
                               "(the plan copies nothing off site yet)")
    return out  # type: ignore[return-value]


@click.group()
def plan() -> None:
    """Backup plans: volumes, schedule rules, window, retention."""


@plan.command("list")
@FORMAT
@pass_state
def plan_list(state: State, fmt: str) -> None:
    found = state.client.plans.list()
    emit({"plans": found}, fmt, found, PLAN_COLUMNS)


@plan.command("show")
@click.argument("plan_id")
@FORMAT
@pass_state
def plan_show(state: State, plan_id: str, fmt: str) -> None:
    show(state.client.plans.get(plan_id), fmt)


@plan.command("create")
@click.option("--name", required=True)
@click.option("--volume", "volumes", multiple=True,
              help="Cinder volume id or name (repeat for several)")
@click.option("--cinder-group", metavar="GROUP_ID",
              help="Instead of --volume: protect the volumes of this Cinder generic volume "
                   "group, following it as volumes join or leave it (crash-consistent "
                   "together, as with --group)")
@click.option("--group", "group", is_flag=True, help="The same as --consistency group")
@click.option("--paused", is_flag=True, help="Create it paused (`plan resume` starts it)")
@SCHEDULE
@SETTINGS
@FORMAT
@pass_state
def plan_create(state: State, /, name: str, volumes: tuple[str, ...], cinder_group: str | None,
                group: bool, paused: bool, fmt: str, **options: Any) -> None:
    fields = _fields(options, None)
    if "rules" not in fields:
        raise click.UsageError("give at least one --incremental or --full cron rule "
                               "(or an --rrule)")
    if bool(volumes) == bool(cinder_group):
        raise click.UsageError("give the volumes (--volume, repeatable) or one --cinder-group")
    fields["name"] = name
    if cinder_group:
        fields["cinder_group"] = cinder_group
    else:
        fields["volumes"] = [state.client.volumes.resolve(v) for v in volumes]
    if group:
        fields["consistency"] = "group"
    if paused:
        fields["enabled"] = False
    show(state.client.plans.create(fields), fmt)


@plan.command("update")
@click.argument("plan_id")
@click.option("--name")
@click.option("--volume", "volumes", multiple=True,
              help="Replace the plan's volumes: Cinder volume id or name (repeat)")
@click.option("--cinder-group", metavar="GROUP_ID|none",
              help="Follow this Cinder group's volumes; 'none' stops following (the plan "
                   "keeps the volumes it has)")
@SCHEDULE
@SETTINGS
@click.option("--no-offsite", is_flag=True, help="Stop the off-site copies")
@FORMAT
@pass_state
def plan_update(state: State, /, plan_id: str, name: str | None, volumes: tuple[str, ...],
                cinder_group: str | None, no_offsite: bool, fmt: str,
                **options: Any) -> None:
    """Change a plan: only what is given. New rules replace the plan's rules; a new
    schedule takes effect from the next slot after now."""
    if no_offsite and options["offsite"]:
        raise click.UsageError("give --offsite TARGET or --no-offsite, not both")
    fields = _fields(options, state.client.plans.get(plan_id))
    if name is not None:
        fields["name"] = name
    if volumes:
        fields["volumes"] = [state.client.volumes.resolve(v) for v in volumes]
    if cinder_group is not None:
        fields["cinder_group"] = None if cinder_group.lower() == "none" else cinder_group
    if no_offsite:
        fields["offsite"] = None
    if not fields:
        raise click.UsageError("nothing to change: give what to change (see --help)")
    show(state.client.plans.update(plan_id, fields), fmt)


@plan.command("preview")
@click.option("--plan", "plan_id", help="Also what the draft would keep and prune of this "
                                        "plan's restore points")
@click.option("--count", type=click.IntRange(1, 100), default=10, show_default=True,
              help="Next runs to list")
@SCHEDULE
@FORMAT
@pass_state
def plan_preview(state: State, /, plan_id: str | None, count: int, fmt: str,
                 **options: Any) -> None:
    """What a plan with these rules and retention would do (stores nothing): its rules in
    words, its next runs, what its retention keeps of a year's backups."""
    rules = _rules(options.pop("incrementals"), options.pop("fulls"), options.pop("rrules"))
    if not rules:
        raise click.UsageError("give at least one --incremental or --full cron rule")
    draft: JSON = {"rules": rules, "count": count, "plan_id": plan_id,
                   "retention": {KEEP[k]: options[k] or 0 for k in KEEP}}
    if options["timezone"]:
        draft["timezone"] = options["timezone"]
    if options["window"]:
        draft["window"] = _window(options["window"])
    data = state.client.plans.preview(draft)
    if fmt == "json":
        show(data, fmt)
        return
    for rule in data["rules"]:
        click.echo(f"rule: {rule}")
    emit(data, fmt, data["runs"], [("UTC", field("at")), ("Local", field("local")),
                                   ("Kind", field("kind"))])
    kept = data["retention"]
    click.echo(f"over {kept['days']} days the schedule makes {kept['made']} backups; the "
               f"retention keeps {len(kept['kept'])}")
    existing = data.get("existing")
    if existing:
        click.echo(f"of the plan's restore points it keeps {existing['kept']} and prunes "
                   f"{existing['pruned']}")


@plan.command("delete")
@click.argument("plan_id")
@pass_state
def plan_delete(state: State, plan_id: str) -> None:
    state.client.plans.delete(plan_id)
    click.echo(f"plan {plan_id} deleted (its restore points stay)")


@plan.command("pause")
@click.argument("plan_id")
@FORMAT
@pass_state
def plan_pause(state: State, plan_id: str, fmt: str) -> None:
    """Stop making new jobs for the plan."""
    show(state.client.plans.pause(plan_id), fmt)


@plan.command("resume")
@click.argument("plan_id")
@FORMAT
@pass_state
def plan_resume(state: State, plan_id: str, fmt: str) -> None:
    """Continue the plan's schedule from the next slot."""
    show(state.client.plans.resume(plan_id), fmt)


@plan.command("run")
@click.argument("plan_id")
@click.option("--full", is_flag=True, help="Full backups instead of the plan's next kind")
@WAIT
@FORMAT
@pass_state
def plan_run(state: State, plan_id: str, full: bool, wait: bool, fmt: str) -> None:
    """Back up every volume of the plan now."""
    result = state.client.plans.run(plan_id, kind="full" if full else None)
    jobs = result["jobs"]
    if wait:
        jobs = [progress.wait(state.client, j["id"], bar=fmt != "json") for j in jobs]
        result["jobs"] = jobs
    emit(result, fmt, jobs, JOB_COLUMNS)
    failed = [j for j in jobs if wait and j["status"] != "succeeded"]
    if failed:
        raise ApiError(f"{len(failed)} of {len(jobs)} backups did not succeed: " + "; ".join(
            f"{j['id']}: {(j.get('error') or {}).get('message', j['status'])}" for j in failed))


@plan.command("next-runs")
@click.argument("plan_id")
@click.option("--count", type=int, default=10, show_default=True)
@click.option("--after", metavar="TIME", help="Slots after this time (ISO 8601 with zone)")
@FORMAT
@pass_state
def plan_next_runs(state: State, plan_id: str, count: int, after: str | None,
                   fmt: str) -> None:
    data = state.client.plans.next_runs(plan_id, count=count, after=after)
    emit(data, fmt, data["runs"], [("UTC", field("at")), ("Local", field("local")),
                                   ("Kind", field("kind")), ("Starts", field("starts_at"))])


@plan.command("retention-preview")
@click.argument("plan_id")
@FORMAT
@pass_state
def plan_retention_preview(state: State, plan_id: str, fmt: str) -> None:
    """Each available restore point of the plan: kept (by which rules) or pruned next."""
    data = state.client.plans.retention_preview(plan_id)
    emit(data, fmt, data["restore_points"], [
        ("Restore point", field("restore_point_id")), ("Volume", field("volume")),
        ("Created", field("created_at")), ("Day", field("local_date")),
        ("Kind", field("kind")), ("Keep", lambda r: "keep" if r["keep"] else "prune"),
        ("Kept by", lambda r: ", ".join(r["kept_by"]))])


COMMANDS = [plan]
