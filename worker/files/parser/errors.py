"""What the parser's operations refuse with. Each class's `code` names it on the wire (the
protocol sends `{"type": "error", "error": code, "message": ...}`) and maps to one class of
services/errors.py on the parent's side:

    NotFound -> PathNotFound          NotADir -> NotADirectory      IsDir -> IsADirectory
    Unreadable -> FilesUnreadable     Encrypted -> FilesEncrypted   Limit -> ParserLimitExceeded

Messages go to the tenant as they are: short, naming the path or the limit, never a
traceback."""

from __future__ import annotations

from typing import ClassVar


class ParserError(Exception):
    """An operation's answer that is not a result (a user's mistake or the image's state)."""

    code: ClassVar[str] = "Unreadable"


class NotFound(ParserError):
    """No such path or partition (a path that is not allowed is not found, too: "..")."""

    code = "NotFound"


class NotADir(ParserError):
    """A path lists or walks through something that is not a directory."""

    code = "NotADir"


class IsDir(ParserError):
    """File data asked of something that is not a regular file (a directory, a symlink, a
    device)."""

    code = "IsDir"


class Unreadable(ParserError):
    """No filesystem Cairn can read here, or one too damaged to answer."""

    code = "Unreadable"


class Encrypted(ParserError):
    """An encrypted volume (LUKS) or file: its bytes cannot be read without a key."""

    code = "Encrypted"


class Limit(ParserError):
    """A request past one of the parser's bounds (a page, a read, a search's visits)."""

    code = "Limit"


class ImageReadFailed(Exception):
    """The image's reader failed (the parent answered a read with a failure: a damaged or
    deleted restore point). The image adapter raises it; the parsers never treat it as a
    damaged filesystem (they re-raise it where they catch a library's errors), so the
    parent sees the reader's own error."""
