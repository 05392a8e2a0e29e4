"""Whether a project still owns a Cinder volume when a job for it starts. Ownership is
checked when a user names a volume, but Cinder volumes change hands (a volume transfer),
and a plan made before that would go on reading a volume that is now another project's."""

from __future__ import annotations

from services.errors import VolumeNotFound, VolumeNotOwned
from services.openstack.cinder import CinderGateway, CinderVolume
from services.records.volumes import Volume


def check_owner(cinder: CinderGateway | None, volume: Volume,
                project_id: str) -> CinderVolume | None:
    """Raise VolumeNotOwned (or VolumeNotFound) unless `project_id` owns the Cinder volume
    behind `volume`; returns what Cinder said of it (None for an RBD image named by an
    administrator: it has no owner in Cinder), so a job asks Cinder once."""
    if volume.cinder_volume_id is None or cinder is None:
        return None
    try:
        found = cinder.as_service().get(volume.cinder_volume_id)
    except VolumeNotFound:
        raise VolumeNotFound(
            f"Cinder volume {volume.cinder_volume_id} no longer exists; remove it from the "
            "plans that protect it", volume=volume.cinder_volume_id) from None
    if found.project_id is not None and found.project_id != project_id:
        raise VolumeNotOwned(
            f"Cinder volume {volume.cinder_volume_id} now belongs to another project (was it "
            "transferred?), so this project no longer backs it up; its restore points stay. "
            "Remove it from the plans that protect it", volume=volume.cinder_volume_id)
    return found
