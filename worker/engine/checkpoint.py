"""A backup's checkpoint: how far the copy got and the digests of what it copied, so that a
retry after a crash continues there instead of starting over.

Kept in RADOS beside the backup image as `cairn.checkpoint.<rp>`. Entries are appended (the
object grows with the copy, it is never rewritten), then the `resume` xattr is set to the
object index before which every entry is present; a crash between the two leaves entries
past the mark, which a reader ignores. The `plan` xattr names what the copy was (its base
and size): a retry with a different plan starts over."""

from __future__ import annotations

import contextlib
import logging
import struct
from dataclasses import dataclass, field

import rados

from services.records.restore_points import OWNER_XATTR
from worker.engine.copy import Digests

log = logging.getLogger(__name__)

_ENTRY = struct.Struct("<QB16s")  # index, has digest, digest


@dataclass
class Checkpoint:
    plan: str
    resume_index: int = 0
    digests: Digests = field(default_factory=dict)


class CheckpointWriter:
    """Appends what became final since the last save; call `save` at the progress interval."""

    def __init__(self, ioctx: rados.Ioctx, name: str, plan: str, start: Checkpoint | None,
                 *, volume_id: str = "") -> None:
        self.ioctx = ioctx
        self.name = name
        self.saved_index = start.resume_index if start else 0
        if start is None:
            with contextlib.suppress(rados.ObjectNotFound):
                ioctx.remove_object(name)
            ioctx.write_full(name, b"")
            ioctx.set_xattr(name, "plan", plan.encode())
            ioctx.set_xattr(name, "resume", b"0")
            if volume_id:
                ioctx.set_xattr(name, OWNER_XATTR, volume_id.encode())

    def save(self, resume_index: int, digests: Digests) -> None:
        if resume_index <= self.saved_index:
            return
        final = sorted(i for i in list(digests) if self.saved_index <= i < resume_index)
        blob = b"".join(_ENTRY.pack(i, digests[i] is not None, digests[i] or bytes(16))
                        for i in final)
        if blob:
            self.ioctx.append(self.name, blob)
        self.ioctx.set_xattr(self.name, "resume", str(resume_index).encode())
        self.saved_index = resume_index


def load(ioctx: rados.Ioctx, name: str, plan: str) -> Checkpoint | None:
    """The checkpoint of a copy with this plan, or None when there is none to resume (or
    it is damaged: a retry then starts over, which costs time, never correctness)."""
    try:
        if ioctx.get_xattr(name, "plan").decode() != plan:
            return None
        resume_index = int(ioctx.get_xattr(name, "resume").decode())
        size, _mtime = ioctx.stat(name)
        blob = ioctx.read(name, length=size) if size else b""
    except (rados.ObjectNotFound, rados.NoData):
        return None
    except (ValueError, UnicodeDecodeError):
        log.warning("checkpoint %s is damaged; the copy starts over", name)
        return None
    if resume_index < 0:
        log.warning("checkpoint %s is damaged; the copy starts over", name)
        return None
    digests: Digests = {}
    for offset in range(0, len(blob) - len(blob) % _ENTRY.size, _ENTRY.size):
        index, has, value = _ENTRY.unpack_from(blob, offset)
        if index < resume_index:
            digests[index] = value if has else None
    return Checkpoint(plan, resume_index, digests)


def remove(ioctx: rados.Ioctx, name: str) -> None:
    with contextlib.suppress(rados.ObjectNotFound):
        ioctx.remove_object(name)
