"""`cairn job`: what ran, runs and waits; a running job's QoS changed, or the job
cancelled."""

from __future__ import annotations

import click

from cli.context import JOB_COLUMNS, WAIT, State, finish_job, pass_state, qos, qos_options
from cli.output import FORMAT, emit, show


@click.group()
def job() -> None:
    """Jobs: what ran, runs and waits."""


@job.command("list")
@click.option("--plan", "plan_id")
@click.option("--volume", help="Only this volume's (Cinder id or name)")
@click.option("--kind", type=click.Choice(["backup", "restore", "delete", "verify", "prune",
                                           "copy"]))
@click.option("--status", type=click.Choice(["queued", "running", "succeeded", "failed",
                                             "cancelled", "skipped"]))
@click.option("--since", metavar="TIME", help="Created at or after (ISO 8601 with zone)")
@click.option("--until", metavar="TIME", help="Created before (ISO 8601 with zone)")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True)
@FORMAT
@pass_state
def job_list(state: State, plan_id: str | None, volume: str | None, kind: str | None,
             status: str | None, since: str | None, until: str | None, limit: int,
             fmt: str) -> None:
    client = state.client
    found = client.jobs.list(
        plan_id=plan_id, volume=None if volume is None else client.volumes.resolve(volume),
        kind=kind, status=status, since=since, until=until, limit=limit)
    emit({"jobs": found}, fmt, found, JOB_COLUMNS)


@job.command("show")
@click.argument("job_id")
@WAIT
@FORMAT
@pass_state
def job_show(state: State, job_id: str, wait: bool, fmt: str) -> None:
    finish_job(state, state.client.jobs.get(job_id), wait, fmt)


@job.command("set")
@click.argument("job_id")
@qos_options("job")
@FORMAT
@pass_state
def job_set(state: State, job_id: str, qos_bytes_per_second: int | str | None,
            qos_ops_per_second: int | str | None, fmt: str) -> None:
    """Change a queued or running backup's, restore's, verify's or copy's limits (a
    running copy follows within a second); 'none' removes a limit."""
    change = qos(qos_bytes_per_second, qos_ops_per_second)
    if not change:
        raise click.UsageError("give --qos-bytes-per-second and/or --qos-ops-per-second")
    show(state.client.jobs.update_qos(job_id, change), fmt)


@job.command("cancel")
@click.argument("job_id")
@FORMAT
@pass_state
def job_cancel(state: State, job_id: str, fmt: str) -> None:
    show(state.client.jobs.cancel(job_id), fmt)


COMMANDS = [job]
