"""Real images made by the real tools (tests/support/fs_images.py), once per session: what
the parser's tests read, in-process and through the sealed child alike."""

from __future__ import annotations

import pytest

from tests.support import fs_images
from tests.support.fs_images import Image


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Image]:
    tmp = tmp_path_factory.mktemp("fs-images")
    tree = fs_images.source_tree(tmp / "src")
    made = {
        "ext4": fs_images.ext4_image(tmp / "ext4.img", tree),
        "xfs": fs_images.xfs_image(tmp / "xfs.img", tree),
        "ntfs": fs_images.ntfs_image(tmp / "ntfs.img", tree),
        "fat32": fs_images.fat32_image(tmp / "fat32.img", tree),
        "btrfs": fs_images.btrfs_image(tmp / "btrfs.img", tree),
        "luks": fs_images.luks_image(tmp / "luks.img"),
    }
    made["gpt"] = fs_images.gpt_disk(tmp / "gpt.img", [made["ext4"], made["fat32"]])
    made["mbr"] = fs_images.mbr_disk(tmp / "mbr.img", [made["ext4"], made["ntfs"],
                                                       made["fat32"]])
    return made
