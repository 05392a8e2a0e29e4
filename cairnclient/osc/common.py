"""What every command of the plugin shares: the client, the API's refusals as osc's errors,
cells a table shows as a person reads them while `-f json|yaml|value` keep the API's
values, `--wait`, and the QoS options."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

from cliff.columns import FormattableColumn
from osc_lib import exceptions
from osc_lib.command import command

from cairnclient import units, waiting
from cairnclient.client import JSON, Client, Qos, Rows
from cairnclient.http import ApiError
from cairnclient.text import printable

NONE = "none"
"""What an option that sets a limit takes to remove it (sent as null)."""

Column = tuple[str, Callable[[JSON], Any]]


class Cell(FormattableColumn):  # type: ignore[misc]
    """A value as the API gave it (json, yaml, value, csv), and as a person reads it in a
    table: sizes, rates and durations in their units, nested objects one `key: value` a
    line, other systems' text with its control characters escaped."""

    def __init__(self, value: Any, text: str) -> None:
        super().__init__(value)
        self._text = text

    def human_readable(self) -> str:
        return self._text


def cell(key: str, value: Any) -> Cell:
    """`value` of the API's field `key` (dotted for nested ones)."""
    return Cell(value, _text(key, value))


def _text(key: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return "\n".join(f"{k}: {_text(f'{key}.{k}', v)}" for k, v in value.items())
    if isinstance(value, list):
        if all(isinstance(v, str | int | float) for v in value):
            return ", ".join(printable(str(v)) for v in value)
        return "\n".join(printable(json.dumps(v, default=str)) for v in value)
    return printable(str(units.readable(key, value)))


def field(name: str) -> Callable[[JSON], Any]:
    return lambda row: row.get(name)


def size(name: str) -> Callable[[JSON], Cell]:
    return lambda row: Cell(row.get(name), units.size(row.get(name)))


def duration(get: Callable[[JSON], Any]) -> Callable[[JSON], Cell]:
    return lambda row: Cell(get(row), units.duration(get(row)))


def listed(columns: Sequence[Column], rows: Rows) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """A Lister's answer: the columns' names, and each row's cells."""
    def shown(value: Any) -> Any:
        if isinstance(value, FormattableColumn):
            return value
        return Cell(value, _text("", value))
    return (tuple(name for name, _ in columns),
            [tuple(shown(get(row)) for _, get in columns) for row in rows])


def one(obj: JSON) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """A ShowOne's answer: every field of the API's object under its own name."""
    keys = tuple(sorted(obj))
    return keys, tuple(cell(k, obj[k]) for k in keys)


class _Cairn:
    """The client; the API's refusals as osc's errors (the API's message, exit 1); and jobs
    followed with --wait, printed, then exit 1 unless they succeeded."""

    app: Any
    _unfinished: list[JSON] | None = None

    @property
    def cairn(self) -> Client:
        client: Client = self.app.client_manager.protection
        return client

    def run(self, parsed_args: argparse.Namespace) -> int:
        try:
            code: int = super().run(parsed_args)  # type: ignore[misc]
        except ApiError as exc:
            raise exceptions.CommandError(printable(exc.message)) from None
        if self._unfinished:
            raise exceptions.CommandError(printable("; ".join(
                waiting.failure(job) for job in self._unfinished)))
        return code

    def finish(self, job: JSON, parsed_args: argparse.Namespace) -> JSON:
        """The job; with --wait, once it ended (and exit 1 after it is shown unless it
        succeeded)."""
        if not parsed_args.wait:
            return job
        job = waiting.wait(self.cairn, job["id"], bar=parsed_args.formatter == "table")
        if job["status"] != "succeeded":
            self._unfinished = [*(self._unfinished or []), job]
        return job


class Command(_Cairn, command.Command):  # type: ignore[misc]
    pass


class Lister(_Cairn, command.Lister):  # type: ignore[misc]
    pass


class ShowOne(_Cairn, command.ShowOne):  # type: ignore[misc]
    pass


def resolve_volume(client: Client, text: str | None) -> str | None:
    return None if text is None else client.volumes.resolve(text)


# --wait ---------------------------------------------------------------------------------

def add_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true",
                        help="Follow the job to its end (a progress bar on stderr with "
                             "-f table); exit 1 unless it succeeded")


# QoS ---------------------------------------------------------------------------------------

def limit(minimum: int) -> Callable[[str], int | str]:
    """An option's type: a whole number of at least `minimum`, or `none` (remove the limit)."""
    def convert(text: str) -> int | str:
        if text.lower() == NONE:
            return NONE
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (or "
                                             f"'{NONE}')") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"{number} is below {minimum}")
        return number
    return convert


def add_qos(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--qos-bytes-per-second", type=limit(1 << 20), metavar="<bytes>",
        help=f"Upper bound on the {what}'s read rate in bytes/s (at least 1048576; "
             f"'{NONE}': no limit)")
    parser.add_argument(
        "--qos-ops-per-second", type=limit(1), metavar="<count>",
        help=f"Upper bound on the {what}'s read operations per second ('{NONE}': no limit)")


def given(value: int | str | None) -> int | None:
    return None if value in (None, NONE) else int(value)


def qos(parsed_args: argparse.Namespace) -> Qos:
    """The limits given (`none` sent as null, one not given left out)."""
    out: Qos = {}
    if parsed_args.qos_bytes_per_second is not None:
        out["qos_bytes_per_second"] = given(parsed_args.qos_bytes_per_second)
    if parsed_args.qos_ops_per_second is not None:
        out["qos_ops_per_second"] = given(parsed_args.qos_ops_per_second)
    return out


# Jobs ---------------------------------------------------------------------------------------

def _percent(job: JSON) -> Cell:
    percent = (job.get("progress") or {}).get("percent")
    return Cell(percent, f"{percent or 0:.0f}%")


def _rate(job: JSON) -> Cell:
    rate = (job.get("progress") or {}).get("rate_bytes_per_second")
    return Cell(rate, units.rate(rate))


JOB_COLUMNS: list[Column] = [
    ("ID", field("id")), ("Kind", field("kind")), ("Status", field("status")),
    ("Volume", field("volume")), ("Progress", _percent),
    ("Rate", _rate),
    ("Duration", duration(lambda j: (j.get("timings") or {}).get("duration_seconds"))),
    ("Created", lambda j: (j.get("timings") or {}).get("created_at")),
]
