"""Image creation on real Ceph when a worker was killed inside `rbd create`."""

from __future__ import annotations

import pytest
import rados
import rbd

from services.errors import ImageExists
from services.storage import rbd_images
from tests.support import ceph


def interrupted_create(io: rados.Ioctx, name: str) -> None:
    """What a SIGKILL between the steps of `rbd create` leaves: the name and the id
    object, no header. Seen in the suite as a retried backup failing with 'not found'."""
    rbd.RBD().create(io, name, 64 * ceph.MiB, order=22)
    with rbd.Image(io, name) as image:
        image_id = image.id()
    io.remove_object(f"rbd_header.{image_id}")


def test_a_retry_replaces_the_remnant_of_an_interrupted_create(
        backups_pool: rados.Ioctx) -> None:
    name = ceph.unique_name("remnant")
    interrupted_create(backups_pool, name)
    with pytest.raises(ImageExists):  # without the flag, the name stays taken
        rbd_images.create_image(backups_pool, name, 64 * ceph.MiB, order=22)
    rbd_images.create_image(backups_pool, name, 64 * ceph.MiB, order=22,
                            metadata={"cairn.test": "yes"}, replace_remnant=True)
    with rbd_images.open_image(backups_pool, name) as image:
        assert image.size() == 64 * ceph.MiB
        assert rbd_images.metadata(image, "cairn.test") == "yes"
    rbd_images.remove_image(backups_pool, name)


def test_a_whole_image_is_never_replaced(backups_pool: rados.Ioctx) -> None:
    name = ceph.unique_name("whole")
    rbd_images.create_image(backups_pool, name, 64 * ceph.MiB, order=22)
    with rbd_images.open_image(backups_pool, name) as image:
        image.write(b"\x01" * 4096, 0)
    with pytest.raises(ImageExists):
        rbd_images.create_image(backups_pool, name, 32 * ceph.MiB, order=22,
                                replace_remnant=True)
    with rbd_images.open_image(backups_pool, name) as image:
        assert image.size() == 64 * ceph.MiB
        assert image.read(0, 4096) == b"\x01" * 4096
    rbd_images.remove_image(backups_pool, name)
