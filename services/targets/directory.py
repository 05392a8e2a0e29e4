"""A directory target (`CAIRN_DIRECTORY_TARGETS`): a directory on a local file system or an
NFS mount (what Cinder's posix and NFS backup drivers and Proxmox's datastores serve)
holding exactly an object target's chunk format: content-addressed, compressed and sealed
chunks deduplicated per project, one sealed manifest per restore point, the data key made
exactly once (ADR 0007, `chunked.py`), as files under it (`services/storage/directory.py`:
written to a temporary file, fsynced and renamed; the directory's content is not trusted).

Its data path is the chunk format's, the object targets' one (`worker/targets/`): nothing
here but where the files live, how the probe finds the directory, and the temporary files
of writes that never finished, which the orphan scan removes after its grace."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from services.db import Database
from services.settings import DirectoryTargetSettings, Settings
from services.storage.ceph import CephClusters
from services.storage.directory import Directory
from services.targets.base import Configured
from services.targets.chunked import ChunkKind, holds_its_key, scan_manifests
from services.targets.scans import Finding, OrphanScan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DirectoryTarget(ChunkKind, Configured[DirectoryTargetSettings]):
    kind: ClassVar[str] = "directory"
    noun: ClassVar[str] = "directory target"

    @property
    def location(self) -> str:
        return str(self.config.path)

    def backend(self) -> Directory:
        return Directory(self.config.path)

    def probe(self, clusters: CephClusters, db: Database) -> bool:
        """The path is a directory this process may write in, on a file system mounted
        read-write, and holds the data key Cairn's database records for the target: a
        scheduler or worker where the NFS share is not mounted finds an empty directory
        (or none) there, which is not where the target's data is."""
        try:
            directory = self.backend()
            directory.check()
            return holds_its_key(db, directory, self)
        except Exception as exc:
            log.warning("directory target %s (%s) is not usable: %s", self.name,
                        self.config.path, exc)
            return False

    def scan_orphans(self, scan: OrphanScan, sharing: set[str]) -> None:
        """Its manifests, as every chunk-format target's (`chunked.scan_manifests`), and
        the temporary files of writes whose process was killed before it renamed them:
        removed once older than the grace (a write under way is never that old). Both
        within the target's time (`OrphanScan.target_deadline`)."""
        directory = self.backend()
        deadline = scan.target_deadline()
        scan_manifests(scan, self.name, self.location, directory, deadline=deadline)
        for left in directory.temporaries(deadline=deadline):
            if left.modified >= scan.cutoff:
                continue
            scan.act(Finding("remove", "temporary file", f"{self.location}/{left.key}",
                             "a write that never finished: its process ended before "
                             "renaming it into place"),
                     partial(directory.remove_temporary, left.key))


def configured(settings: Settings) -> list[DirectoryTarget]:
    """Every directory target the settings name."""
    return [DirectoryTarget(name, config, config.max_jobs or settings.max_jobs_per_target)
            for name, config in settings.directory_targets.items()]
