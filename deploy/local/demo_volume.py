"""Create the demo volume `make up` promises: an RBD image `volumes/demo` on ceph-a holding
random data, a region of zeros and a never-written hole. Does nothing if it exists."""

from __future__ import annotations

import hashlib
import sys

import rados
import rbd

MiB = 1 << 20


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
                data = hashlib.shake_256(b"cairn demo volume").digest(16 * MiB)
                image.write(data, 0)
                image.write(bytes(4 * MiB), 16 * MiB)  # zeros: stored as nothing
                image.write(data[: 8 * MiB], 40 * MiB)  # 20-40 MiB never written: a hole
            print(f"demo volume: ceph-a/{pool}/{name} (64 MiB, 24 MiB of data)")
    finally:
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
