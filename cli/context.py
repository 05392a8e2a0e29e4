"""What every command of `cairn` shares: the client (connected on first use), `--wait`, the
QoS options, and a job followed to its end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from cairnclient import waiting
from cairnclient.client import JSON, Client, Qos
from cairnclient.http import ApiError, Http
from cairnclient.units import duration, rate
from cli import progress
from cli.output import Column, field, show

F = TypeVar("F", bound=Callable[..., Any])

WAIT = click.option("--wait", is_flag=True, help="Follow the job to its end with a progress bar")

NONE = "none"
"""What an option that sets a limit takes to remove it (sent as null)."""


class State:
    def __init__(self, cloud: str | None, endpoint: str | None) -> None:
        self.cloud = cloud
        self.endpoint = endpoint
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(Http.connect(self.cloud, self.endpoint))
        return self._client


pass_state = click.make_pass_decorator(State)


def client() -> Client:
    """The client of the command running now (for commands that take no `State`)."""
    state: State = click.get_current_context().find_root().obj
    return state.client


def limit(minimum: int) -> Callable[[click.Context, click.Parameter, str | None],
                                   int | str | None]:
    """An option's callback: a whole number of at least `minimum`, or `none` (remove the
    limit); None when the option was not given."""
    def convert(ctx: click.Context, param: click.Parameter, value: str | None
                ) -> int | str | None:
        if value is None or value.lower() == NONE:
            return None if value is None else NONE
        try:
            number = int(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a whole number (or '{NONE}')"
                                     ) from None
        if number < minimum:
            raise click.BadParameter(f"{number} is below {minimum}")
        return number
    return convert


def given(value: int | str | None) -> int | None:
    """A `limit` option's value as the API takes it: `none` is null."""
    return None if value in (None, NONE) else int(value)


def qos_options(what: str) -> Callable[[F], F]:
    """--qos-bytes-per-second and --qos-ops-per-second, for a job of `what`."""
    def decorate(command: F) -> F:
        command = click.option(
            "--qos-ops-per-second", callback=limit(1), metavar="N",
            help=f"Upper bound on the {what}'s read operations per second ('none': no "
                 "limit)")(command)
        return click.option(
            "--qos-bytes-per-second", callback=limit(1 << 20), metavar="BYTES",
            help=f"Upper bound on the {what}'s read rate in bytes/s (at least 1048576; "
                 "'none': no limit)"
        )(command)
    return decorate


def qos(bytes_per_second: int | str | None, ops_per_second: int | str | None) -> Qos:
    """The limits given on the command line (`none` sent as null, one not given left out)."""
    out: Qos = {}
    if bytes_per_second is not None:
        out["qos_bytes_per_second"] = given(bytes_per_second)
    if ops_per_second is not None:
        out["qos_ops_per_second"] = given(ops_per_second)
    return out


def _percent(job: JSON) -> str:
    return f"{(job.get('progress') or {}).get('percent') or 0:.0f}%"


def _rate(job: JSON) -> str:
    return rate((job.get("progress") or {}).get("rate_bytes_per_second"))


JOB_COLUMNS: list[Column] = [
    ("ID", field("id")), ("Kind", field("kind")), ("Status", field("status")),
    ("Volume", field("volume")), ("Progress", _percent), ("Rate", _rate),
    ("Duration", lambda j: duration((j.get("timings") or {}).get("duration_seconds"))),
    ("Created", lambda j: (j.get("timings") or {}).get("created_at")),
]


def finish_job(state: State, job: JSON, wait: bool, fmt: str) -> None:
    """Show the job; with --wait, follow it first, and exit 1 unless it succeeded."""
    if wait:
        job = progress.wait(state.client, job["id"], bar=fmt != "json")
    show(job, fmt)
    if wait and job["status"] != "succeeded":
        raise ApiError(waiting.failure(job))
