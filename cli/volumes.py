"""`cairn volume`, `backup`, `target`, `usage`, `quota`, `overview`, `orphan`: the project's
volumes and what protecting them takes and costs.

A volume is named as `openstack volume show` takes it: a Cinder id or name (or, for an
administrator, the RBD image `cluster/pool/image`); a name is looked up in the project's
volumes (`Volumes.resolve`)."""

from __future__ import annotations

import click

from cairnclient import units
from cli.context import WAIT, State, finish_job, given, limit, pass_state, qos, qos_options
from cli.output import FORMAT, emit, field, show

VOLUME_HELP = "Cinder volume id or name"


@click.group()
def volume() -> None:
    """Your project's Cinder volumes and their protection."""


@volume.command("list")
@click.option("--unprotected", is_flag=True, help="Only volumes no enabled plan covers")
@click.option("--name", help="Only volumes of exactly this name")
@FORMAT
@pass_state
def volume_list(state: State, unprotected: bool, name: str | None, fmt: str) -> None:
    found = state.client.volumes.list(unprotected=unprotected, name=name)
    emit({"volumes": found}, fmt, found, [
        ("ID", field("id")), ("Name", field("name")), ("Size (GiB)", field("size_gb")),
        ("Status", field("status")), ("Protected", field("protected")),
        ("Plans", lambda v: ", ".join(p["name"] for p in v["plans"])),
        ("Restore points", field("restore_points")),
        ("Newest restore point", lambda v: (v["newest_restore_point"] or {}).get("created_at")),
    ])


@volume.command("show")
@click.argument("volume")
@FORMAT
@pass_state
def volume_show(state: State, volume: str, fmt: str) -> None:
    """One volume (id or name) and its protection."""
    show(state.client.volumes.get(state.client.volumes.resolve(volume)), fmt)


@click.group()
def backup() -> None:
    """On-demand backups."""


@backup.command("create")
@click.argument("volume")
@click.option("--full", is_flag=True, help="A full copy instead of an incremental")
@click.option("--target", help="Backup target (default: the service's; `cairn target list`)")
@qos_options("backup")
@WAIT
@FORMAT
@pass_state
def backup_create(state: State, volume: str, full: bool, target: str | None,
                  qos_bytes_per_second: int | str | None, qos_ops_per_second: int | str | None,
                  wait: bool, fmt: str) -> None:
    """Back up VOLUME (Cinder id or name) now."""
    job = state.client.backups.create(
        state.client.volumes.resolve(volume), kind="full" if full else "incremental",
        target=target, qos=qos(qos_bytes_per_second, qos_ops_per_second))
    finish_job(state, job, wait, fmt)


@click.group()
def target() -> None:
    """Backup targets (configured by the operator)."""


@target.command("list")
@FORMAT
@pass_state
def target_list(state: State, fmt: str) -> None:
    """The targets a plan, backup or copy may name."""
    found = state.client.targets()
    emit({"targets": found}, fmt, found, [
        ("Name", field("name")), ("Kind", field("kind")), ("Default", field("default")),
        ("Jobs at once", field("max_jobs"))])


QUOTA_COLUMNS = [
    ("Resource", field("what")), ("Limit", field("limit")), ("In use", field("used"))]


def _quota(data: dict[str, object], fmt: str) -> None:
    limits: dict[str, object] = data["limits"]  # type: ignore[assignment]
    usage: dict[str, object] = data["usage"]  # type: ignore[assignment]
    gigabytes = limits.get("gigabytes")
    emit(data, fmt, [
        {"what": "restore points", "used": usage["restore_points"],
         "limit": "unlimited" if limits.get("restore_points") is None
         else limits["restore_points"]},
        {"what": "storage", "used": units.size(usage["bytes_stored"]),  # type: ignore[arg-type]
         "limit": "unlimited" if gigabytes is None
         else units.size(float(gigabytes) * 2**30)},  # type: ignore[arg-type]
    ], QUOTA_COLUMNS)


@click.command("usage")
@FORMAT
@pass_state
def usage(state: State, fmt: str) -> None:
    """Your project's quota and what it uses."""
    _quota(state.client.quotas.usage(), fmt)


@click.group()
def quota() -> None:
    """Projects' quotas (administrators; `cairn usage` for your own)."""


@quota.command("show")
@click.argument("project_id")
@FORMAT
@pass_state
def quota_show(state: State, project_id: str, fmt: str) -> None:
    _quota(state.client.quotas.get(project_id), fmt)


@quota.command("set")
@click.argument("project_id")
@click.option("--restore-points", callback=limit(0), metavar="N",
              help="Restore points the project may hold ('none': no limit)")
@click.option("--gigabytes", metavar="GIB",
              help="Storage in GiB, fractions allowed ('none': no limit)")
@FORMAT
@pass_state
def quota_set(state: State, project_id: str, restore_points: int | str | None,
              gigabytes: str | None, fmt: str) -> None:
    """Set a project's limits; a limit not given stays as it is. Nothing stored is
    deleted: over quota, new backups are refused."""
    if restore_points is None and gigabytes is None:
        raise click.UsageError("give --restore-points and/or --gigabytes")
    limits = state.client.quotas.get(project_id)["limits"]
    new_points = limits["restore_points"] if restore_points is None else given(restore_points)
    new_gigabytes = limits["gigabytes"]
    if gigabytes is not None:
        try:
            new_gigabytes = None if gigabytes.lower() == "none" else float(gigabytes)
        except ValueError:
            raise click.BadParameter(f"{gigabytes!r} is not a number (or 'none')",
                                     param_hint="--gigabytes") from None
    _quota(state.client.quotas.set(project_id, restore_points=new_points,
                                   gigabytes=new_gigabytes), fmt)


@click.command("overview")
@FORMAT
@pass_state
def overview(state: State, fmt: str) -> None:
    """Your project's protection at a glance: volumes covered, fallen behind, next runs."""
    data = state.client.overview()
    if fmt == "json":
        show(data, fmt)
        return
    click.echo(f"volumes: {data.get('volumes')}, protected: {data.get('protected')}, "
               f"unprotected: {data.get('unprotected')}")
    if data["stale"]:
        click.echo("fallen behind their plan:")
        emit(data, fmt, data["stale"], [
            ("Volume", lambda s: s.get("name") or s.get("volume")),
            ("Plan", lambda s: s.get("plan_name") or s.get("plan_id")),
            ("Newest restore point", field("newest_at")),
            ("Plan's interval", lambda s: units.duration(s.get("interval_seconds")))])
    if data["next_runs"]:
        click.echo("next runs:")
        emit(data, fmt, data["next_runs"], [
            ("Plan", lambda r: r.get("plan_name") or r.get("plan_id")), ("At", field("at")),
            ("Kind", field("kind")), ("Volumes", field("volumes"))])


@click.group()
def orphan() -> None:
    """Leftovers in the backup pools (administrators)."""


@orphan.command("list")
@click.option("--grace-seconds", type=click.FloatRange(min=0),
              help="Instead of the configured grace period")
@FORMAT
@pass_state
def orphan_list(state: State, grace_seconds: float | None, fmt: str) -> None:
    """What the orphan reconciler would remove or flag now (changes nothing)."""
    data = state.client.orphans(grace_seconds=grace_seconds)
    emit(data, fmt, data["findings"], [
        ("Action", field("action")), ("What", field("what")), ("Location", field("location")),
        ("Reason", field("reason")), ("Restore point", field("restore_point_id"))])
    for error in data["errors"] if fmt != "json" else []:
        click.echo(f"not scanned: {error}", err=True)


COMMANDS = [volume, backup, target, usage, quota, overview, orphan]
