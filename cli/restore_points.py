"""`cairn restore-point`, `restore` and `restore-point-group`: the copies, bringing them
back, and the group restore points a `consistency: group` plan makes."""

from __future__ import annotations

import click

from cairnclient.client import JSON
from cairnclient.units import duration, size
from cli.context import JOB_COLUMNS, WAIT, State, finish_job, pass_state, qos, qos_options
from cli.files import files
from cli.output import FORMAT, Column, emit, field, show

RESTORE_POINT_COLUMNS: list[Column] = [
    ("ID", field("id")), ("Volume", field("volume")), ("Kind", field("kind")),
    ("Status", field("status")), ("Size", lambda r: size(r.get("size_bytes"))),
    ("Copied", lambda r: size(r.get("bytes_copied"))),
    ("Took", lambda r: duration(r.get("duration_seconds"))),
    ("Created", field("created_at"))]


@click.group("restore-point")
def restore_point() -> None:
    """Restore points (the copies)."""


@restore_point.command("list")
@click.option("--volume", help="Only this volume's (Cinder id or name)")
@click.option("--plan", "plan_id", help="Only this plan's")
@click.option("--limit", type=click.IntRange(1), default=1000, show_default=True,
              help="The newest this many")
@FORMAT
@pass_state
def restore_point_list(state: State, volume: str | None, plan_id: str | None, limit: int,
                       fmt: str) -> None:
    client = state.client
    found = client.restore_points.list(
        volume=None if volume is None else client.volumes.resolve(volume), plan_id=plan_id,
        limit=limit)
    emit({"restore_points": found}, fmt, found, RESTORE_POINT_COLUMNS)


@restore_point.command("days")
@click.option("--volume", required=True, help="The volume (Cinder id or name)")
@click.option("--timezone", default="UTC", show_default=True, help="Whose days (IANA zone)")
@click.option("--days", type=click.IntRange(1, 1100), default=90, show_default=True)
@FORMAT
@pass_state
def restore_point_days(state: State, volume: str, timezone: str, days: int, fmt: str) -> None:
    """A volume's available restore points per day (a calendar)."""
    data = state.client.restore_points.days(state.client.volumes.resolve(volume),
                                            timezone=timezone, days=days)
    emit(data, fmt, data["days"], [("Day", field("date")), ("Full", field("full")),
                                   ("Incremental", field("incremental"))])


@restore_point.command("show")
@click.argument("rp_id")
@FORMAT
@pass_state
def restore_point_show(state: State, rp_id: str, fmt: str) -> None:
    show(state.client.restore_points.get(rp_id), fmt)


@restore_point.command("delete")
@click.argument("rp_id")
@WAIT
@FORMAT
@pass_state
def restore_point_delete(state: State, rp_id: str, wait: bool, fmt: str) -> None:
    finish_job(state, state.client.restore_points.delete(rp_id), wait, fmt)


@restore_point.command("verify")
@click.argument("rp_id")
@click.option("--sample", type=click.FloatRange(0, 1, min_open=True), metavar="FRACTION",
              help="Read only this fraction of the objects, chosen at random (e.g. 0.05)")
@qos_options("verify")
@WAIT
@FORMAT
@pass_state
def restore_point_verify(state: State, rp_id: str, sample: float | None,
                         qos_bytes_per_second: int | str | None,
                         qos_ops_per_second: int | str | None, wait: bool, fmt: str) -> None:
    """Re-read a restore point and compare it with its checksums."""
    finish_job(state, state.client.restore_points.verify(
        rp_id, sample_fraction=sample, qos=qos(qos_bytes_per_second, qos_ops_per_second)),
        wait, fmt)


@restore_point.command("copy")
@click.argument("rp_id")
@click.option("--target", help="Object target to copy to (default: the service's)")
@qos_options("copy")
@WAIT
@FORMAT
@pass_state
def restore_point_copy(state: State, rp_id: str, target: str | None,
                       qos_bytes_per_second: int | str | None,
                       qos_ops_per_second: int | str | None, wait: bool, fmt: str) -> None:
    """Copy a restore point off site, to an object target, from the backup pool."""
    finish_job(state, state.client.restore_points.copy(
        rp_id, target=target, qos=qos(qos_bytes_per_second, qos_ops_per_second)), wait, fmt)


@restore_point.command("lock")
@click.argument("rp_id")
@click.option("--until", "until", metavar="TIME",
              help="ISO 8601 time with zone (e.g. 2027-12-31T00:00:00Z); omit to unlock "
                   "(administrators only, as is shortening a lock)")
@FORMAT
@pass_state
def restore_point_lock(state: State, rp_id: str, until: str | None, fmt: str) -> None:
    """Keep a restore point from retention and deletion until a time."""
    show(state.client.restore_points.lock(rp_id, until), fmt)


restore_point.add_command(files)


@click.group()
def restore() -> None:
    """Restores."""


@restore.command("create")
@click.argument("rp_id")
@click.option("--new-volume", metavar="NAME", help="Restore into a new Cinder volume")
@click.option("--size", type=int, help="Size in GiB of the new volume (default: the copy's)")
@click.option("--type", "volume_type", help="Volume type of the new volume")
@click.option("--description", help="Description of the new volume")
@click.option("--volume", "volume", help="Restore in place over this detached volume (Cinder "
                                         "id or name)")
@click.option("--image", metavar="[[CLUSTER/]POOL/]IMAGE",
              help="Restore into a new RBD image (administrators)")
@click.option("--instant", is_flag=True,
              help="Hand the new volume over within seconds (a clone of the backup), and "
                   "flatten it in the background; --wait waits for the flatten")
@qos_options("restore")
@WAIT
@FORMAT
@pass_state
def restore_create(state: State, rp_id: str, new_volume: str | None, size: int | None,
                   volume_type: str | None, description: str | None, volume: str | None,
                   image: str | None, instant: bool, qos_bytes_per_second: int | str | None,
                   qos_ops_per_second: int | str | None, wait: bool, fmt: str) -> None:
    if sum(x is not None for x in (new_volume, volume, image)) != 1:
        raise click.UsageError("give exactly one of --new-volume NAME, --volume VOLUME and "
                               "--image IMAGE")
    if instant and volume:
        raise click.UsageError("--instant needs --new-volume or --image: a restore in place "
                               "is a copy")
    new: JSON | None = None if new_volume is None else {
        "name": new_volume, "size_gb": size, "volume_type": volume_type,
        "description": description}
    finish_job(state, state.client.restore_points.restore(
        rp_id, new_volume=new,
        volume_id=None if volume is None else state.client.volumes.resolve(volume),
        target=image, mode="instant" if instant else "copy",
        qos=qos(qos_bytes_per_second, qos_ops_per_second)), wait, fmt)


@click.group("restore-point-group")
def restore_point_group() -> None:
    """Group restore points: the volumes of a `--group` plan's run, at one instant."""


@restore_point_group.command("list")
@click.option("--plan", "plan_id", help="Only this plan's")
@click.option("--limit", type=click.IntRange(1), default=1000, show_default=True,
              help="Look among the newest this many restore points")
@FORMAT
@pass_state
def group_list(state: State, plan_id: str | None, limit: int, fmt: str) -> None:
    found = state.client.restore_point_groups.list(plan_id=plan_id, limit=limit)
    emit({"restore_point_groups": found}, fmt, found, [
        ("ID", field("id")), ("Plan", field("plan_id")),
        ("Volumes", lambda g: len(g["restore_points"])), ("Complete", field("complete")),
        ("Created", field("created_at"))])


@restore_point_group.command("show")
@click.argument("group_id")
@FORMAT
@pass_state
def group_show(state: State, group_id: str, fmt: str) -> None:
    data = state.client.restore_point_groups.get(group_id)
    if fmt == "json":
        show(data, fmt)
        return
    show({k: v for k, v in data.items() if k != "restore_points"}, fmt)
    emit(data, fmt, data["restore_points"], RESTORE_POINT_COLUMNS)


@restore_point_group.command("restore")
@click.argument("group_id")
@click.option("--name-prefix", help="Into new Cinder volumes named <prefix><volume's name>")
@click.option("--image-prefix", metavar="[[CLUSTER/]POOL/]PREFIX",
              help="Into new RBD images named <prefix><volume's image> (administrators)")
@click.option("--in-place", is_flag=True, help="Over the volumes themselves (all detached)")
@click.option("--instant", is_flag=True, help="Clones handed over within seconds, "
                                              "flattened in the background")
@qos_options("restore")
@FORMAT
@pass_state
def group_restore(state: State, group_id: str, name_prefix: str | None,
                  image_prefix: str | None, in_place: bool, instant: bool,
                  qos_bytes_per_second: int | str | None, qos_ops_per_second: int | str | None,
                  fmt: str) -> None:
    """Restore every volume of the group to its instant, all or none."""
    if sum((name_prefix is not None, image_prefix is not None, in_place)) != 1:
        raise click.UsageError("give exactly one of --name-prefix, --image-prefix and "
                               "--in-place")
    data = state.client.restore_point_groups.restore(
        group_id, name_prefix=name_prefix, target_prefix=image_prefix, in_place=in_place,
        mode="instant" if instant else "copy",
        qos=qos(qos_bytes_per_second, qos_ops_per_second))
    emit(data, fmt, data["jobs"], JOB_COLUMNS)


COMMANDS = [restore_point, restore, restore_point_group]
