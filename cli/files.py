"""`cairn restore-point files`: the files inside a restore point, read in place (no restore,
no mount): its partitions, a directory's entries, one path's facts, a file or an archive
downloaded, a file across the volume's restore points, a search by name.

Names come from the tenant's filesystem: tables show them through `printable`; a download
is written only where the user said (or to the path's own base name in the current
directory), through a temporary file renamed at the end, so a failed download leaves no
half file and an existing file is replaced only with --force."""

from __future__ import annotations

import os
import posixpath
import secrets
import shlex
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click
import requests

from cairnclient.http import ApiError
from cairnclient.units import size
from cli.context import client
from cli.output import FORMAT, Column, emit, field, printable, show
from cli.progress import Transfer

CHUNK = 1 << 20
"""Bytes read from the response and written at once."""


PARTITION = click.option("--partition", type=click.IntRange(min=0), metavar="INDEX",
                         help="Partition index (`files partitions`); default: the first "
                              "readable filesystem")


@click.group()
def files() -> None:
    """Files inside a restore point: browse, search and download them without a restore."""


@files.command("partitions")
@click.argument("rp_id")
@FORMAT
def partitions(rp_id: str, fmt: str) -> None:
    """The partitions and filesystems of a restore point."""
    data = client().files.partitions(rp_id)
    emit(data, fmt, data["partitions"], [
        ("Index", field("index")), ("Scheme", field("scheme")),
        ("Filesystem", field("filesystem")), ("Label", field("label")),
        ("Name", field("name")), ("Size", lambda p: size(p.get("size"))),
        ("Readable", field("readable")), ("Reason", field("reason"))])


TYPE_BITS = {"file": stat.S_IFREG, "dir": stat.S_IFDIR, "symlink": stat.S_IFLNK}


def mode_text(entry: dict[str, Any]) -> str:
    """`drwxr-xr-x` as ls shows it; the type from the entry when the mode lacks it."""
    mode = int(entry.get("mode") or 0)
    if not stat.S_IFMT(mode):
        mode |= TYPE_BITS.get(str(entry.get("type")), 0)
    text = stat.filemode(mode)
    return text if stat.S_IFMT(mode) else "?" + text[1:]


ENTRY_COLUMNS: list[Column] = [
    ("Mode", mode_text), ("Size", lambda e: size(e.get("size"))),
    ("Modified", field("mtime")),
    ("Name", lambda e: e["name"] + (f" -> {e['target']}" if e.get("target") else "")),
]


@files.command("ls")
@click.argument("rp_id")
@click.argument("path", default="/")
@PARTITION
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="Entries per page")
@click.option("--marker", metavar="NAME", help="Start after this name (a page's next_marker)")
@click.option("--all", "every", is_flag=True, help="Follow next_marker to the last entry")
@FORMAT
def ls(rp_id: str, path: str, partition: int | None, limit: int, marker: str | None,
       every: bool, fmt: str) -> None:
    """List a directory (a page at a time, sorted by name)."""
    data = client().files.list(rp_id, path, partition=partition, limit=limit, marker=marker)
    entries = list(data["entries"])
    while every and data.get("next_marker"):
        data = client().files.list(rp_id, path, partition=partition, limit=limit,
                                   marker=data["next_marker"])
        entries.extend(data["entries"])
    data = {**data, "entries": entries}
    emit(data, fmt, entries, ENTRY_COLUMNS)
    if data.get("next_marker") and fmt != "json":
        click.echo(f"more entries: --marker {_quoted(data['next_marker'])} for the next page,"
                   " or --all", err=True)


@files.command("stat")
@click.argument("rp_id")
@click.argument("path")
@PARTITION
@FORMAT
def stat_(rp_id: str, path: str, partition: int | None, fmt: str) -> None:
    """One path's facts (type, size, mode, owner, modified, symlink target)."""
    show(client().files.stat(rp_id, path, partition=partition), fmt)


@files.command("get")
@click.argument("rp_id")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@PARTITION
@click.option("-o", "--output", metavar="FILE",
              help="Where to write ('-' for stdout; a directory: the name inside it); "
                   "default: the path's base name in the current directory")
@click.option("--archive", type=click.Choice(["tar", "zip"]),
              help="A directory or several paths as one archive, streamed as it is made")
@click.option("--force", is_flag=True, help="Replace FILE if it exists")
def get(rp_id: str, paths: tuple[str, ...], partition: int | None, output: str | None,
        archive: str | None, force: bool) -> None:
    """Download a file, or a directory or several paths as a tar or zip archive."""
    if len(paths) > 1 and not archive:
        raise click.UsageError("several paths make one archive: add --archive tar or "
                               "--archive zip")
    files_of = client().files
    if archive:
        body = files_of.archive(rp_id, list(paths), fmt="zip" if archive == "zip" else "tar",
                                partition=partition)
        name = _archive_name(rp_id, paths, archive)
    else:
        body = files_of.content(rp_id, paths[0], partition=partition)
        name = posixpath.basename(paths[0].rstrip("/"))
    destination = None if output == "-" else _destination(output, name, force)
    try:
        with body as response:
            total = _length(response.headers.get("Content-Length"))
            bar = Transfer(printable(name)[:40], total) if sys.stderr.isatty() else None
            chunks = response.iter_content(CHUNK)
            if destination is None:
                written = _copy(chunks, sys.stdout.buffer, bar, total)
            else:
                written = _save(chunks, destination, force, bar, total)
    except ApiError as exc:
        if exc.code == "is_a_directory" and not archive:
            # The service's message says what to do in the API's words; the CLI's are a flag.
            what = exc.message.removesuffix(": download it as an archive")
            raise ApiError(f"{what}: add --archive tar or --archive zip to download it as "
                           "an archive", exc.status, exc.code) from None
        raise
    if destination is not None:
        click.echo(f"{printable(str(destination))}: {written} bytes", err=True)


@files.command("versions")
@click.argument("path")
@click.option("--volume", "volume", required=True, help="The volume (Cinder id or name)")
@PARTITION
@click.option("--limit", type=click.IntRange(1, 60), default=30, show_default=True,
              help="The volume's newest restore points to look in")
@FORMAT
def versions(path: str, volume: str, partition: int | None, limit: int, fmt: str) -> None:
    """A file across the volume's restore points (newest first): present or not, size,
    modified, SHA-256, to find its last good copy."""
    volumes = client().volumes
    data = volumes.file_versions(volumes.resolve(volume), path, partition=partition,
                                 limit=limit)
    emit(data, fmt, data["versions"], [
        ("Restore point", field("restore_point_id")), ("Present", field("present")),
        ("Type", field("type")), ("Size", lambda v: size(v.get("size"))),
        ("Modified", field("mtime")),
        ("SHA-256", lambda v: (v.get("sha256") or "")[:16]), ("Reason", field("reason"))])


@files.command("search")
@click.argument("rp_id")
@click.argument("pattern")
@click.option("--path", default="/", show_default=True, help="Search under this directory")
@PARTITION
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@FORMAT
def search(rp_id: str, pattern: str, path: str, partition: int | None, limit: int,
           fmt: str) -> None:
    """Paths whose name matches PATTERN (shell-style: '*.conf', 'report-202?.pdf')."""
    data = client().files.search(rp_id, pattern, path=path, partition=partition, limit=limit)
    emit(data, fmt, data["entries"], [
        ("Mode", mode_text), ("Size", lambda e: size(e.get("size"))),
        ("Modified", field("mtime")), ("Path", field("path"))])
    if data.get("truncated") and fmt != "json":
        click.echo(f"the search stopped early ({data.get('visited')} entries looked at): "
                   "narrow it with --path or a longer pattern", err=True)


def _archive_name(rp_id: str, paths: tuple[str, ...], fmt: str) -> str:
    own = posixpath.basename(paths[0].rstrip("/")) if len(paths) == 1 else ""
    return f"{own or 'restore-point-' + rp_id[:8]}.{fmt}"


def _destination(output: str | None, name: str, force: bool) -> Path:
    if output is None or Path(output).is_dir():
        if name in ("", ".", "..") or "/" in name or "\0" in name:
            raise click.UsageError(f"{printable(name)!r} is no file name: give -o FILE")
        destination = Path(output or ".") / name
    else:
        destination = Path(output)
    if destination.exists() and not force:
        raise click.ClickException(f"{printable(str(destination))} exists: --force to "
                                   "replace it, or -o another file")
    return destination


def _save(chunks: Iterator[bytes], destination: Path, force: bool, bar: Transfer | None,
          total: int | None) -> int:
    """Write into a new file beside `destination` (mode from the umask, like any file the
    user makes), then rename it over: `destination` holds all the bytes or is untouched."""
    part = destination.with_name(f".{destination.name}.{secrets.token_hex(4)}.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            written = _copy(chunks, out, bar, total)
        if not force and destination.exists():
            raise click.ClickException(f"{printable(str(destination))} appeared meanwhile: "
                                       "--force to replace it")
        os.replace(part, destination)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return written


def _copy(chunks: Iterator[bytes], out: IO[bytes], bar: Transfer | None,
          total: int | None) -> int:
    """Copy the body through; a body that broke off or came short of its Content-Length
    is an error (exit 1), never a download that looks complete."""
    written = 0
    try:
        for chunk in chunks:
            out.write(chunk)
            written += len(chunk)
            if bar:
                bar.add(len(chunk))
    except requests.RequestException as exc:
        raise ApiError(f"the download broke off after {written} bytes ({exc}); try again"
                       ) from None
    finally:
        if bar:
            bar.finish()
    out.flush()
    if total is not None and written != total:
        raise ApiError(f"the download ended after {written} of {total} bytes; try again")
    return written


def _length(header: str | None) -> int | None:
    return int(header) if header and header.isdigit() else None


def _quoted(name: str) -> str:
    return shlex.quote(printable(name))
