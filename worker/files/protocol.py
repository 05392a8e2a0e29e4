"""The framing between a ParserSession (the parent) and its parser child, on the child's
stdin and stdout. Standard library only: both sides import it, and the child imports
nothing it does not need.

A frame is a 4-byte big-endian length, that many bytes of a JSON object (the header), then
`header["bytes"]` raw bytes (the payload). One call:

    parent -> child  {"type": "call", "op": "list", "args": {...}}
    child -> parent  {"type": "read", "offset": o, "length": n}        any number of times,
    parent -> child  {"type": "data", "bytes": k} + k bytes              each answered by one
                     or {"type": "fail", "error": "DataCorrupt", "message": ...}
    child -> parent  {"type": "result", "value": ..., "bytes": k} + k bytes     (the end)
                     or {"type": "error", "error": "NotFound", "message": ...}

A child, once sealed, says {"type": "ready", ...} before it reads its first call. Its first
call is `open` ({"size": n}: the image's size), then the Operations methods.

Every frame is checked against limits before its bytes are read: a header or a payload
larger than the reader accepts is a ProtocolError, and the parent kills a child that sends
one (the child is the side a crafted filesystem may control)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Final

LENGTH: Final = struct.Struct(">I")

CALL: Final = "call"
OPEN: Final = "open"
READ: Final = "read"
DATA: Final = "data"
FAIL: Final = "fail"
RESULT: Final = "result"
ERROR: Final = "error"
READY: Final = "ready"

OPS: Final = frozenset({OPEN, "partitions", "list", "stat", "runs", "read", "search", "walk"})
"""What a call may ask: `open` first, then worker/files/parser/ops.py's Operations methods."""

# The errors a child ends a call with, by name (worker/files/parser/errors.py's classes;
# the parent maps each to one services.errors class). Any other failure is INTERNAL: the
# child says only a short reason, never a traceback.
NOT_FOUND: Final = "NotFound"
NOT_A_DIR: Final = "NotADir"
IS_DIR: Final = "IsDir"
UNREADABLE: Final = "Unreadable"
ENCRYPTED: Final = "Encrypted"
LIMIT: Final = "Limit"
INTERNAL: Final = "Internal"
PARSER_ERRORS: Final = frozenset({NOT_FOUND, NOT_A_DIR, IS_DIR, UNREADABLE, ENCRYPTED, LIMIT})

MAX_READ_BYTES: Final = 4 << 20
"""The most one read request may ask of the parent (the child splits larger reads)."""

MAX_MESSAGE_CHARS: Final = 500
"""An error's message is cut to this: it is a reason, shown to the tenant."""


class ProtocolError(Exception):
    """A frame broke the framing or its limits: the peer is broken or hostile."""


class FrameTooLarge(ProtocolError):
    """A frame's header or payload is larger than its reader accepts."""


@dataclass(frozen=True)
class FrameLimits:
    """What a reader of frames accepts: the child's frames are bounded by the session's
    reply size, the parent's by the largest read the child may ask."""

    max_header: int
    max_payload: int


CHILD_READS: Final = FrameLimits(max_header=1 << 20, max_payload=MAX_READ_BYTES)
"""What the child accepts from the parent: a call's arguments, the bytes it asked for."""


@dataclass(frozen=True)
class Frame:
    header: dict[str, Any]
    payload: bytes = b""

    @property
    def type(self) -> str:
        kind = self.header.get("type")
        return kind if isinstance(kind, str) else ""


def encode(header: dict[str, Any], payload: bytes = b"") -> bytes:
    """One frame's bytes; `header["bytes"]` is set to the payload's length."""
    body = json.dumps({**header, "bytes": len(payload)}, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False).encode()
    if len(body) > 0xFFFFFFFF:
        raise ProtocolError(f"a header of {len(body)} bytes cannot be framed")
    return LENGTH.pack(len(body)) + body + payload


def header_length(prefix: bytes, limits: FrameLimits) -> int:
    (length,) = LENGTH.unpack(prefix)
    if length > limits.max_header:
        raise FrameTooLarge(f"a frame header of {length} bytes (at most {limits.max_header})")
    return int(length)


def parse_header(body: bytes, limits: FrameLimits) -> tuple[dict[str, Any], int]:
    """The header and its payload's length, checked against `limits`."""
    try:
        header = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise ProtocolError(f"a frame header is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise ProtocolError("a frame header is not a JSON object")
    size = header.get("bytes", 0)
    if type(size) is not int or size < 0:
        raise ProtocolError(f"a frame's payload length is not a count: {size!r}")
    if size > limits.max_payload:
        raise FrameTooLarge(f"a frame payload of {size} bytes (at most {limits.max_payload})")
    return header, size


@dataclass
class FrameDecoder:
    """Frames out of bytes as they arrive (the parent reads a child's pipe under a
    deadline, in pieces); each header is checked before its payload is waited for."""

    limits: FrameLimits
    _buffer: bytearray = field(default_factory=bytearray)
    _header: dict[str, Any] | None = None
    _header_end: int = 0
    _payload: int = 0

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def next(self) -> Frame | None:
        """The next whole frame, or None until more bytes are fed."""
        if self._header is None:
            if len(self._buffer) < LENGTH.size:
                return None
            length = header_length(bytes(self._buffer[:LENGTH.size]), self.limits)
            if len(self._buffer) < LENGTH.size + length:
                return None
            self._header_end = LENGTH.size + length
            self._header, self._payload = parse_header(
                bytes(self._buffer[LENGTH.size:self._header_end]), self.limits)
        end = self._header_end + self._payload
        if len(self._buffer) < end:
            return None
        frame = Frame(self._header, bytes(self._buffer[self._header_end:end]))
        del self._buffer[:end]
        self._header = None
        return frame


def read_frame(stream: BinaryIO, limits: FrameLimits) -> Frame | None:
    """The next frame off a blocking stream (the child's stdin), or None at its end."""
    prefix = _read_exactly(stream, LENGTH.size, at_start=True)
    if prefix is None:
        return None
    body = _read_exactly(stream, header_length(prefix, limits))
    assert body is not None
    header, size = parse_header(body, limits)
    payload = _read_exactly(stream, size) if size else b""
    assert payload is not None
    return Frame(header, payload)


def _read_exactly(stream: BinaryIO, count: int, *, at_start: bool = False) -> bytes | None:
    parts: list[bytes] = []
    left = count
    while left:
        part = stream.read(left)
        if not part:
            if at_start and left == count:
                return None
            raise ProtocolError(f"the stream ended {left} bytes into a frame")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def message_of(error: BaseException) -> str:
    """A short, single-line reason for an error (never a traceback)."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:MAX_MESSAGE_CHARS]
