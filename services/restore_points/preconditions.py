"""What every use case of a restore point checks before it queues a job for it: restores,
verifies, deletes and copies alike. Shared from here, below the use cases, so that none of
them imports another for it."""

from __future__ import annotations

from services.errors import TargetNotConfigured
from services.records.restore_points import RestorePoint
from services.settings import Settings, target_names


def require_target(settings: Settings, rp: RestorePoint) -> None:
    """A restore point whose target this service no longer configures cannot be read or
    removed here (say, an object target dropped from the settings): refused before any job
    is queued, not by a worker that cannot find it."""
    if rp.target not in target_names(settings):
        raise TargetNotConfigured(
            f"restore point {rp.id} is kept on target {rp.target!r}, which this service does "
            "not configure (any more): ask the operator to configure it again",
            restore_point_id=rp.id, target=rp.target)
