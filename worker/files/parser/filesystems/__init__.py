"""The filesystem kinds the parser reads: the only place that lists them. A partition is
offered to each kind's `probe` in this order (the strictest signatures first: FAT's boot
sector is the easiest to mistake)."""

from __future__ import annotations

from .base import Filesystem, Info, Node, Run
from .btrfs import Btrfs
from .ext import Ext
from .fat import Fat
from .ntfs import Ntfs
from .xfs import Xfs

KINDS: tuple[type[Filesystem], ...] = (Ext, Xfs, Btrfs, Ntfs, Fat)

__all__ = ["KINDS", "Filesystem", "Info", "Node", "Run"]
