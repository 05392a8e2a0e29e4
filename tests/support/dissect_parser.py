"""A minimal Operations over an ext4 image with the real Dissect packages, for
bench/files_children.py: a child's start costs what production's does (the six
filesystems' packages imported) while worker/files/parser/ops.py is written elsewhere."""

from __future__ import annotations

from typing import Any, BinaryIO

from dissect.extfs import ExtFS

PRELOAD = ("dissect.volume", "dissect.extfs", "dissect.xfs", "dissect.ntfs", "dissect.fat",
           "dissect.btrfs", "dissect.volume.disk")


class Operations:
    def __init__(self, image: BinaryIO, size: int) -> None:
        self.image = image
        self.size = size

    def partitions(self) -> list[dict[str, Any]]:
        return [{"index": 0, "scheme": "disk", "offset": 0, "size": self.size}]

    def stat(self, partition: int | None, path: str) -> dict[str, Any]:
        inode = ExtFS(self.image).get(path)
        return {"path": path, "size": inode.size, "mtime": inode.mtime.isoformat()}
