"""Create the demo volume `make up` promises: an RBD image `volumes/demo` on ceph-a holding
random data, a region of zeros and a never-written hole. Does nothing if it exists.

    demo_volume.py CEPH_CONF
    demo_volume.py --cinder CLOUDS_YAML CEPH_CONF   (`make up OPENSTACK=1`: a Cinder volume
                                                     `demo` of the demo project, same data)"""

from __future__ import annotations

import hashlib
import sys

import rados
import rbd

MiB = 1 << 20


def fill(image: rbd.Image) -> None:
    data = hashlib.shake_256(b"cairn demo volume").digest(16 * MiB)
    image.write(data, 0)
    image.write(bytes(4 * MiB), 16 * MiB)  # zeros: stored as nothing
    image.write(data[: 8 * MiB], 40 * MiB)  # 20-40 MiB never written: a hole


def main(conf: str, pool: str = "volumes", name: str = "demo") -> int:
    cluster = rados.Rados(conffile=conf)
    cluster.connect(timeout=10)
    try:
        with cluster.open_ioctx(pool) as ioctx:
            if name in rbd.RBD().list(ioctx):
                print(f"demo volume: ceph-a/{pool}/{name} (already there)")
                return 0
            rbd.RBD().create(ioctx, name, 64 * MiB)
            with rbd.Image(ioctx, name) as image:
                fill(image)
            print(f"demo volume: ceph-a/{pool}/{name} (64 MiB, 24 MiB of data)")
    finally:
        cluster.shutdown()
    return 0


def main_cinder(clouds_yaml: str, conf: str) -> int:
    """A Cinder volume `demo` in the demo project, made through Cinder, its data written
    into the RBD image Cinder's driver made for it."""
    import os

    from cairnclient import config as cloud_config
    from services.openstack.cinder import CinderApi
    from services.openstack.sessions import make_session

    config = cloud_config.load("cairn-demo", {**os.environ, "OS_CLIENT_CONFIG_FILE": clouds_yaml})
    api = CinderApi(make_session(config.auth), {"service_type": "volumev3",
                                                "interface": "public"})
    cluster = rados.Rados(conffile=conf)
    cluster.connect(timeout=10)
    try:
        with cluster.open_ioctx("volumes") as ioctx:
            images = set(rbd.RBD().list(ioctx))
        for old in (v for v in api.list_volumes() if v.name == "demo"):
            if f"volume-{old.id}" in images:
                print(f"demo volume: Cinder volume {old.id} (already there)")
                return 0
            # The micro cluster keeps its data in memory: after a restart Cinder still
            # lists a volume whose image is gone. Replace it.
            api.delete(old.id)
    finally:
        cluster.shutdown()
    volume = api.create(size_gb=1, name="demo", volume_type=None,
                        description="Cairn's demo volume", metadata={})
    api.wait_for(volume.id, "available", 120)
    cluster = rados.Rados(conffile=conf)
    cluster.connect(timeout=10)
    try:
        image_name = f"volume-{volume.id}"
        with cluster.open_ioctx("volumes") as ioctx, rbd.Image(ioctx, image_name) as image:
            fill(image)
    finally:
        cluster.shutdown()
    print(f"demo volume: Cinder volume {volume.id} `demo` (1 GiB, 24 MiB of data)")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cinder"]:
        sys.exit(main_cinder(*sys.argv[2:]))
    sys.exit(main(*sys.argv[1:]))
