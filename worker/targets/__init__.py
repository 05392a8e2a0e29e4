"""The worker's half of each kind of target (`DataPath`, `worker/targets/base.py`), found
by the kind of the `Target` the domain's registry (`services/targets/`) gives: one module
per kind, and this table the only place in the worker that lists them. A unit test holds
it to the registry's kinds (tests/unit/worker/targets/).

The domain may not import the worker (pyproject.toml's contracts), so the kinds' data
paths cannot be methods of `Target` itself: they live on this side of the line, keyed by
`Target.kind`, and the managers ask `data_path(target)` instead of which kind it is."""

from __future__ import annotations

from collections.abc import Mapping

from services import targets
from services.settings import Settings
from services.targets.directory import DirectoryTarget
from services.targets.object_store import ObjectStoreTarget
from services.targets.rbd_pool import RbdPoolTarget
from worker.targets.base import DataPath
from worker.targets.object_store import ObjectStorePath
from worker.targets.rbd_pool import RbdPoolPath

__all__ = ["DataPath", "data_path", "data_path_of", "kinds"]

_PATHS: Mapping[str, DataPath] = {
    RbdPoolTarget.kind: RbdPoolPath(),
    ObjectStoreTarget.kind: ObjectStorePath(),
    # The object store's data path is the chunk format's: it opens any ChunkTarget's
    # backend (targets.chunked), a bucket or a directory alike.
    DirectoryTarget.kind: ObjectStorePath(),
}


def kinds() -> list[str]:
    """The kinds the worker has a data path for."""
    return list(_PATHS)


def data_path(target: targets.Target) -> DataPath:
    return _PATHS[target.kind]


def data_path_of(settings: Settings, name: str) -> DataPath:
    """The data path of the target of this name; TargetNotConfigured (the job fails,
    saying so) when the service does not configure it (any more)."""
    return data_path(targets.get(settings, name))
