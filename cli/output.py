"""Tables for people, JSON for scripts (`-f json` prints exactly what the API answered, with
every character beyond ASCII escaped). A table shows sizes, rates and durations as a person
reads them (`1.0 GiB`, `56.3 MiB/s`, `0.3 s`); JSON keeps the exact numbers.

Tables and messages show what other systems wrote as well as what the tenant did: Cinder's
volume names and error texts, names saved before the API refused control characters, and
for the cloud's administrator every project's. A terminal obeys the escape sequences in
such text (repaint, retitle, hide what follows) and reorders text around bidirectional
controls, so each character that is not plain printable text is shown as its Python
escape (`\x1b`, `\u202e`), never passed to the terminal."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import click

from cairnclient import units
from cairnclient.text import printable

__all__ = ["Column", "emit", "field", "printable", "show", "table"]

Column = tuple[str, Callable[[dict[str, Any]], Any]]

FORMAT = click.option("-f", "--format", "fmt", type=click.Choice(["table", "json"]),
                      default="table", show_default=True, help="Output format")


def field(name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda row: row.get(name)


def emit(data: Any, fmt: str, rows: list[dict[str, Any]],
         columns: Sequence[Column]) -> None:
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
        return
    table(rows, columns)


def table(rows: list[dict[str, Any]], columns: Sequence[Column]) -> None:
    cells = [[_text(get(row)) for _, get in columns] for row in rows]
    heads = [name for name, _ in columns]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(heads)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    click.echo(line)
    click.echo("| " + " | ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)) + " |")
    click.echo(line)
    for row in cells:
        click.echo("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                   + " |")
    click.echo(line)


def show(obj: dict[str, Any], fmt: str) -> None:
    """One object: a Field | Value table."""
    if fmt == "json":
        click.echo(json.dumps(obj, indent=2, sort_keys=True, default=str))
        return
    rows = [{"k": k, "v": units.readable(k, v)} for k, v in _flatten(obj) if v is not None]
    table(rows, [("Field", field("k")), ("Value", field("v"))])


def _flatten(obj: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested objects as dotted fields (`progress.percent`), so a table stays narrow."""
    out: list[tuple[str, Any]] = []
    for key, value in obj.items():
        if isinstance(value, dict) and value:
            out.extend(_flatten(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return printable(str(value))
