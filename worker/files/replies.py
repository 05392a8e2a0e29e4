"""The parser child's answers, checked before anything of the file service uses them.

The child parses the tenant's bytes, so what it answers is the tenant's (or, taken over,
an attacker's): every value of every result is checked for the shape docs/files.md gives
it (types, ranges, the mtime's pattern, sizes within the restore point), and one that is
not so is `Malformed`, which the session turns into FilesUnreadable (and a fresh child).
Nothing malformed reaches an archive's names, a header or a hash."""

from __future__ import annotations

import re
from typing import Any, Final

MAX_NAME_CHARS: Final = 4096
MAX_PATH_CHARS: Final = 16384
"""A path of 4096 bytes, each byte shown as up to three characters (U+FFFD and two)."""
MAX_PARTITIONS: Final = 4096
MAX_ENTRIES: Final = 1_000_000
MAX_RUNS: Final = 1_000_000
MAX_ID: Final = (1 << 32) - 1
MAX_MODE: Final = 0o177777
MTIME: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
TYPES: Final = frozenset({"file", "dir", "symlink", "other"})
SCHEMES: Final = frozenset({"gpt", "mbr", "lvm", "disk"})


class Malformed(Exception):
    """An answer not of the shape its operation has."""


def checked(op: str, value: Any, payload: bytes, args: dict[str, Any],
            volume: int) -> Any:
    """`value` (and `payload`) when they are what `op` answers; Malformed otherwise.
    `volume`: the restore point's size, the bound of every offset and size."""
    if op == "open":
        _expect(value is None, "open answers nothing")
    elif op == "partitions":
        _expect(isinstance(value, list) and len(value) <= MAX_PARTITIONS, "partitions")
        for partition in value:
            _partition(partition, volume)
    elif op == "list":
        _object(value, {"path": _path, "partition": _partition_index,
                        "entries": lambda e: _entries(e, volume, with_path=False),
                        "next_marker": _optional(_name)})
    elif op == "stat":
        _entry(value, volume, with_path=True)
    elif op == "runs":
        if value is not None:
            _object(value, {"size": lambda n: _size(n, None), "runs": _runs})
    elif op == "read":
        _expect(value is None and len(payload) <= int(args.get("length", 0)), "read")
    elif op == "search":
        _object(value, {"entries": lambda e: _entries(e, volume, with_path=True),
                        "truncated": _boolean, "visited": lambda n: _size(n, None)})
    elif op == "walk":
        _object(value, {"entries": lambda e: _entries(e, volume, with_path=True),
                        "truncated": _boolean})
    else:
        raise Malformed(f"an answer to an unknown operation {op!r}")
    return value


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise Malformed(what)


def _object(value: Any, fields: dict[str, Any], optional: frozenset[str] = frozenset()) -> None:
    _expect(isinstance(value, dict), "an object")
    for key, check in fields.items():
        if key in value:
            check(value[key])
        else:
            _expect(key in optional, f"no {key}")


def _optional(check: Any) -> Any:
    def optional(value: Any) -> None:
        if value is not None:
            check(value)
    return optional


def _boolean(value: Any) -> None:
    _expect(isinstance(value, bool), "a boolean")


def _integer(value: Any, low: int, high: int | None, what: str) -> None:
    _expect(type(value) is int and value >= low and (high is None or value <= high), what)


def _size(value: Any, volume: int | None) -> None:
    # A file's size may pass its volume (a sparse file): the service refuses to read
    # one that does; bounded here only by what a filesystem can say (2^63).
    _integer(value, 0, (1 << 63) if volume is None else volume, "a size")


def _string(value: Any, longest: int, what: str) -> None:
    _expect(isinstance(value, str) and len(value) <= longest and "\0" not in value, what)


def _name(value: Any) -> None:
    _string(value, MAX_NAME_CHARS, "a name")
    _expect("/" not in value, "a name holding '/'")


def _path(value: Any) -> None:
    _string(value, MAX_PATH_CHARS, "a path")
    _expect(value.startswith("/"), "a relative path")


def _partition_index(value: Any) -> None:
    if value is not None:
        _integer(value, 0, 65535, "a partition")


def _partition(value: Any, volume: int) -> None:
    text = _optional(lambda v: _string(v, 256, "a partition's text"))
    _object(value, {"index": _partition_index, "scheme": lambda v: _expect(v in SCHEMES,
                                                                           "a scheme"),
                    "offset": lambda v: _integer(v, 0, volume, "an offset"),
                    "size": lambda v: _integer(v, 0, volume, "a partition's size"),
                    "type": text, "name": text, "filesystem": text, "label": text,
                    "readable": _boolean, "reason": _optional(
                        lambda v: _string(v, 1000, "a reason"))},
            optional=frozenset({"offset", "size", "type", "name", "filesystem", "label",
                                "reason"}))
    _expect(type(value["index"]) is int, "a partition's index")
    _expect(value.get("offset", 0) + value.get("size", 0) <= volume,
            "a partition past the restore point's end")


def _entries(value: Any, volume: int, *, with_path: bool) -> None:
    _expect(isinstance(value, list) and len(value) <= MAX_ENTRIES, "entries")
    for entry in value:
        _entry(entry, volume, with_path=with_path)


def _entry(value: Any, volume: int, *, with_path: bool) -> None:
    fields: dict[str, Any] = {
        "name": lambda v: _string(v, MAX_NAME_CHARS, "a name"),
        "type": lambda v: _expect(v in TYPES, "a type"),
        "size": lambda v: _size(v, None),
        "mode": lambda v: _integer(v, 0, MAX_MODE, "a mode"),
        "uid": _optional(lambda v: _integer(v, 0, MAX_ID, "a uid")),
        "gid": _optional(lambda v: _integer(v, 0, MAX_ID, "a gid")),
        "mtime": _optional(lambda v: _expect(isinstance(v, str) and bool(MTIME.fullmatch(v)),
                                             "an mtime")),
        "target": _optional(lambda v: _string(v, MAX_PATH_CHARS, "a target")),
    }
    if with_path:
        fields["path"] = _path
    _object(value, fields)
    if not (with_path and value["path"] == "/" and value["name"] == ""):  # the root's
        _name(value["name"])
        _expect(value["name"] != "", "an empty name")


def _runs(value: Any) -> None:
    _expect(isinstance(value, list) and len(value) <= MAX_RUNS, "runs")
    for run in value:
        _expect(isinstance(run, list) and len(run) == 2, "a run")
        disk, length = run
        _expect(disk is None or (type(disk) is int and disk >= 0), "a run's offset")
        _integer(length, 0, 1 << 63, "a run's length")
