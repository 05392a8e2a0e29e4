"""The volume a case of the data-path model changes (tests/support/model.py), and the
model of it: only its bytes, a bytearray. Its random program (a clone or a new image, then
writes, zeros, discards, resizes and a flatten) draws from the case's main generator, in
the order the model always drew it; and the images a case made are removed here, later
when a killed worker still watches them."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field

import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB

OBJECT = 4 * MiB


@dataclass
class Volume:
    vols: rados.Ioctx
    name: str
    rng: random.Random
    max_size: int
    log: list[str]
    """The case's steps, which the volume's are among."""
    data: bytearray = field(default_factory=bytearray)
    images: list[str] = field(default_factory=list)
    """The images made for it: the volume first, then the parent it may be a clone of."""

    def _size(self) -> int:
        roll = self.rng.random()
        if roll < 0.1:
            return self.rng.randint(1, 4096)
        if roll < 0.3:
            return self.rng.randint(1, 8) * OBJECT  # aligned
        return self.rng.randint(1, self.max_size)

    def make(self) -> None:
        size = self._size()
        if self.rng.random() < 0.25:
            parent = f"{self.name}-parent"
            self.images.append(parent)
            rbd.RBD().create(self.vols, parent, size)
            with rbd.Image(self.vols, parent) as image:
                payload = self._bytes(size)
                image.write(payload, 0)
                image.create_snap("base")
                image.protect_snap("base")
            rbd.RBD().clone(self.vols, parent, "base", self.vols, self.name,
                            features=rbd.RBD_FEATURE_LAYERING | rbd.RBD_FEATURE_EXCLUSIVE_LOCK
                            | rbd.RBD_FEATURE_OBJECT_MAP | rbd.RBD_FEATURE_FAST_DIFF)
            self.images.insert(0, self.name)
            self.data = bytearray(payload)
            self.log.append(f"clone of a {size}-byte parent")
            return
        rbd.RBD().create(self.vols, self.name, size)
        self.images.insert(0, self.name)
        self.data = bytearray(size)
        self.log.append(f"create {size} bytes")
        if self.rng.random() < 0.8:
            self._write()

    def _bytes(self, n: int) -> bytes:
        return self.rng.randbytes(n)

    def _span(self) -> tuple[int, int]:
        size = len(self.data)
        if self.rng.random() < 0.35:
            # Whole objects: what makes an incremental clear objects on the target (a
            # discard or zeroing that empties an object).
            first = self.rng.randrange(-(-size // OBJECT))
            count = self.rng.randint(1, 3)
            offset = first * OBJECT
            return offset, min(count * OBJECT, size - offset)
        offset = self.rng.randrange(size)
        length = self.rng.randint(1, min(size - offset, self.rng.choice((512, 65536, OBJECT,
                                                                          3 * OBJECT))))
        return offset, length

    def _write(self) -> None:
        offset, length = self._span()
        payload = self._bytes(length)
        with rbd.Image(self.vols, self.name) as image:
            image.write(payload, offset)
        self.data[offset:offset + length] = payload
        self.log.append(f"write {length} at {offset}")

    def _zero(self) -> None:
        offset, length = self._span()
        with rbd.Image(self.vols, self.name) as image:
            if self.rng.random() < 0.5:
                image.write(bytes(length), offset)
                how = "write zeros"
            else:
                image.write_zeroes(offset, length)
                how = "write_zeroes"
        self.data[offset:offset + length] = bytes(length)
        self.log.append(f"{how} {length} at {offset}")

    def _discard(self) -> None:
        offset, length = self._span()
        with rbd.Image(self.vols, self.name) as image:
            image.discard(offset, length)
            # A discard may leave data it cannot free (a partial object of a clone, or
            # under the discard granularity): the model follows what the volume reads.
            after = image.read(offset, length)
        self.data[offset:offset + length] = after
        self.log.append(f"discard {length} at {offset}")

    def _resize(self) -> None:
        new = self._size()
        with rbd.Image(self.vols, self.name) as image:
            image.resize(new)
        old = len(self.data)
        self.data = self.data[:new] + bytearray(max(0, new - old))
        self.log.append(f"resize {old} -> {new}")

    def _flatten(self) -> None:
        with rbd.Image(self.vols, self.name) as image:
            if image.parent_info() is None:
                return
            image.flatten()
        self.log.append("flatten")

    def change(self) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            self._write()
        elif roll < 0.6:
            self._zero()
        elif roll < 0.75:
            self._discard()
        elif roll < 0.92:
            self._resize()
        else:
            with contextlib.suppress(rbd.ImageNotFound):  # parent_info: no parent
                self._flatten()

    def nonzero_objects(self) -> int:
        """Objects holding non-zero data (a restore may not allocate more)."""
        return sum(1 for start in range(0, len(self.data), OBJECT)
                   if self.data[start:start + OBJECT].strip(b"\0"))

    def remove(self) -> None:
        """Remove its images, or leave them to `remove_deferred` when a worker killed
        while it read them still watches them."""
        for position, name in enumerate(self.images):
            with contextlib.suppress(Exception):
                _unprotect_all(self.vols, name)
            try:
                remove_later_if_busy(self.vols, name)
            except Exception:  # a clean-up error must not hide the failure itself
                DEFERRED.append(name)
            if DEFERRED and DEFERRED[-1] == name:
                # A clone's parent can go only after the clone.
                DEFERRED.extend(self.images[position + 1:])
                return


DEFERRED: list[str] = []
"""Images a killed worker still watches (the OSDs drop the watch after ~30 s): removed at
the end of the session instead of making each case wait."""


def remove_later_if_busy(io: rados.Ioctx, name: str) -> None:
    try:
        ceph.remove_image(io, name, wait=0)
    except rbd.ImageBusy:
        DEFERRED.append(name)


def remove_deferred(io: rados.Ioctx) -> None:
    while DEFERRED:
        name = DEFERRED.pop(0)
        with contextlib.suppress(rbd.ImageNotFound):
            _unprotect_all(io, name)
        ceph.remove_image(io, name)


def _unprotect_all(io: rados.Ioctx, name: str) -> None:
    with rbd.Image(io, name) as image:
        for snap in image.list_snaps():
            if image.is_protected_snap(snap["name"]):
                image.unprotect_snap(snap["name"])
