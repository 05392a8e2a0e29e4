"""Paths and names as the parser's callers see them.

A path is absolute, "/"-separated, at most MAX_PATH_BYTES of UTF-8 with no NUL; "." and
empty components are dropped, a ".." component is refused (never resolved: the caller named
something that is not in the tree as listed).

Names: see `display_name` (the reversible rule for names that are not valid Unicode, which
docs/files.md states for tenants)."""

from __future__ import annotations

from .errors import Limit, NotFound

MAX_PATH_BYTES = 4096
MAX_NAME_CHARS = 1024
ESCAPE = "\ufffd"
_HEX = "0123456789ABCDEF"
_SEPARATORS = "/\0"
"""Characters a name never holds as it is shown (see `display_name`)."""


def split_path(path: str) -> list[str]:
    """The components of `path`, as listed names (display form)."""
    if not isinstance(path, str):
        raise NotFound("a path is a string")
    if "\x00" in path:
        raise NotFound("a path may not contain NUL")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise Limit(f"a path may be at most {MAX_PATH_BYTES} bytes long")
    if not path.startswith("/"):
        raise NotFound(f"{path!r} is not an absolute path")
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise NotFound(f"{path}: '..' is not allowed in a path")
        if len(part) > MAX_NAME_CHARS:
            raise NotFound(f"{path}: a name is longer than any filesystem allows")
        parts.append(part)
    return parts


def join_path(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


def display_name(raw: str, *, separators: bool = True) -> str:
    """The name a listing shows for a filesystem's name `raw`, as Dissect decodes it: bytes
    that are not UTF-8 arrive as lone surrogates U+DC80..U+DCFF (Python's surrogateescape),
    UTF-16 code units that pair with nothing (NTFS, FAT) as lone surrogates too.

    The rule (reversible, so a lookup of any listed name finds it):
    - a name that is valid Unicode is shown as it is, except that U+FFFD is doubled;
    - an undecodable byte 0xXY becomes U+FFFD followed by the two hex digits "XY";
    - "/" and NUL, which no filesystem's name holds but a crafted directory entry can,
      become U+FFFD "2F" and U+FFFD "00": a name is always one component of a path, never
      two (a listed "x/passwd" would otherwise name passwd under a sibling "x");
    - any other lone surrogate U+DXYZ becomes U+FFFD, "u" and the four hex digits.
    So a Latin-1 "café" shows as "caf\ufffdE9", valid in JSON and in a URL.

    `separators=False` keeps "/" (a symlink's target is a path, shown as one)."""
    if ESCAPE not in raw and raw.isascii() and "\0" not in raw and (
            not separators or "/" not in raw):
        return raw
    out = []
    for char in raw:
        code = ord(char)
        if char == ESCAPE:
            out.append(ESCAPE * 2)
        elif char in _SEPARATORS and (separators or char == "\0"):
            out.append(f"{ESCAPE}{code:02X}")
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"{ESCAPE}{code - 0xDC00:02X}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"{ESCAPE}u{code:04X}")
        else:
            out.append(char)
    return "".join(out)


def raw_name(shown: str) -> str:
    """The inverse of `display_name`; NotFound for a name no listing can show."""
    if ESCAPE not in shown:
        return shown
    out = []
    i = 0
    while i < len(shown):
        char = shown[i]
        if char != ESCAPE:
            out.append(char)
            i += 1
        elif shown[i + 1:i + 2] == ESCAPE:
            out.append(ESCAPE)
            i += 2
        elif shown[i + 1:i + 2] == "u" and _is_hex(shown[i + 2:i + 6], 4):
            code = int(shown[i + 2:i + 6], 16)
            if not 0xD800 <= code <= 0xDFFF or 0xDC80 <= code <= 0xDCFF:
                raise NotFound(f"{shown!r} is not a name a listing shows")
            out.append(chr(code))
            i += 6
        elif _is_hex(shown[i + 1:i + 3], 2) and chr(int(shown[i + 1:i + 3], 16)) in _SEPARATORS:
            out.append(chr(int(shown[i + 1:i + 3], 16)))
            i += 3
        elif _is_hex(shown[i + 1:i + 3], 2) and int(shown[i + 1:i + 3], 16) >= 0x80:
            out.append(chr(0xDC00 + int(shown[i + 1:i + 3], 16)))
            i += 3
        else:
            raise NotFound(f"{shown!r} is not a name a listing shows")
    return "".join(out)


def name_key(shown: str) -> bytes:
    """The order of a listing: bytewise on the shown name's UTF-8."""
    return shown.encode("utf-8")


def _is_hex(text: str, width: int) -> bool:
    return len(text) == width and all(c in _HEX for c in text)
