from __future__ import annotations

import json
from datetime import datetime

from pydantic import BaseModel, Field, model_validator

from services.base import AnyRow
from services.formats import IMAGE_SPEC, UUID, FreeText
from services.limits.qos_bounds import BytesPerSecond, OpsPerSecond
from services.records.restore_points import RestorePoint, backup_image_name, snapshot_name
from services.status import RestoreMethod, RestorePointKind, RestorePointStatus, VerifyStatus


class NewVolume(BaseModel):
    name: FreeText = Field(min_length=1, max_length=255,
                           description="Name of the new Cinder volume")
    size_gb: int | None = Field(
        default=None, gt=0, le=1024 * 1024,
        description="Size in GiB; at least the restore point's (the default, rounded up)")
    volume_type: FreeText | None = Field(default=None, max_length=255,
                                     description="Cinder volume type; Cinder's default if None")
    description: FreeText | None = Field(default=None, max_length=255)


class RestoreCreate(BaseModel):
    """Exactly one of `target`, `new_volume` and `volume_id`."""

    target: str | None = Field(
        default=None, min_length=1, max_length=512, pattern=IMAGE_SPEC,
        description="New RBD image to restore into: `image` (the source volume's pool), "
                    "`pool/image` or `cluster/pool/image`. It must not exist yet.",
        examples=["demo-restored"],
    )
    new_volume: NewVolume | None = Field(
        default=None, description="Create a new Cinder volume and restore into it")
    volume_id: str | None = Field(
        default=None, pattern=UUID,
        description="Restore in place over this existing Cinder volume; it must be "
                    "`available` (detached) and at least as large as the restore point")
    cinder_backup: bool = Field(
        default=False,
        description="With `volume_id`: the volume is the one Cinder's backup service holds "
                    "for `openstack volume backup restore` (status `restoring-backup`), as "
                    "Cairn's Cinder backup driver asks. Cairn writes over it without taking "
                    "it from Cinder and leaves its status to Cinder. The cloud's "
                    "administrator only (policy `restore_point:restore_for_cinder_backup`)")

    mode: RestoreMethod = Field(
        default=RestoreMethod.COPY,
        description="`copy` (the default): every byte is copied before the volume is handed "
                    "over. `instant`: the new volume or image is a clone of the backup "
                    "snapshot, usable within seconds whatever its size (the job's "
                    "`timings.ready_at`), then flattened in the background (`finished_at`); "
                    "until the flatten ends the restore point cannot be deleted or pruned. "
                    "Needs the backup target on the destination's Ceph cluster; a restore "
                    "in place is always a copy")

    @model_validator(mode="after")
    def _one_destination(self) -> RestoreCreate:
        given = [n for n in ("target", "new_volume", "volume_id") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError("say where to restore with exactly one of target (a new RBD "
                             "image), new_volume (a new Cinder volume) or volume_id (an "
                             f"existing Cinder volume, in place); got {given or 'none'}")
        if self.cinder_backup and self.volume_id is None:
            raise ValueError("cinder_backup names the volume Cinder's backup service holds "
                             "for its restore: give it with volume_id")
        if self.mode == RestoreMethod.INSTANT and self.volume_id is not None:
            raise ValueError("a restore in place (volume_id) is always a copy: the volume "
                             "keeps its identity and attachments, so it cannot become a clone "
                             "of the backup. Use mode copy, or an instant restore into a new "
                             "volume (new_volume)")
        return self
    qos_bytes_per_second: BytesPerSecond | None = Field(
        default=None, description="Upper bound on the restore's read rate")
    qos_ops_per_second: OpsPerSecond | None = Field(
        default=None, description="Upper bound on the restore's read operations per second")


class GroupRestoreCreate(BaseModel):
    """Exactly one of `name_prefix`, `target_prefix` and `in_place`: every volume of the
    group comes back to the group's instant."""

    name_prefix: FreeText | None = Field(
        default=None, min_length=1, max_length=200,
        description="New Cinder volumes named <prefix><the volume's id>")
    target_prefix: str | None = Field(
        default=None, min_length=1, max_length=400, pattern=IMAGE_SPEC,
        description="New RBD images named <prefix><the volume's image> (administrators; "
                    "`pool/prefix` or `cluster/pool/prefix`)")
    in_place: bool = Field(default=False, description="Over the Cinder volumes themselves; "
                                                     "all must be detached")
    mode: RestoreMethod = RestoreMethod.COPY
    qos_bytes_per_second: BytesPerSecond | None = None
    qos_ops_per_second: OpsPerSecond | None = None

    @model_validator(mode="after")
    def _one_destination(self) -> GroupRestoreCreate:
        given = [n for n in ("name_prefix", "target_prefix", "in_place") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError("say where to restore the group with exactly one of name_prefix "
                             "(new Cinder volumes), target_prefix (new RBD images) or in_place "
                             f"(the volumes themselves); got {given or 'none'}")
        return self


class VerifyCreate(BaseModel):
    qos_bytes_per_second: BytesPerSecond | None = Field(
        default=None, description="Upper bound on the verify's read rate")
    qos_ops_per_second: OpsPerSecond | None = None
    sample_fraction: float | None = Field(
        default=None, gt=0, le=1,
        description="Read only this fraction of the objects, chosen at random (a quick "
                    "check); all of them when omitted. A clean sample does not clear an "
                    "earlier finding of corruption: only a full verify does")


class CopyCreate(BaseModel):
    target: FreeText | None = Field(
        default=None, min_length=1, max_length=64,
        description="Object target to copy to (off site); the service's default when omitted")
    qos_bytes_per_second: BytesPerSecond | None = Field(
        default=None, description="Upper bound on the copy's read rate")
    qos_ops_per_second: OpsPerSecond | None = None


class Checksum(BaseModel):
    algorithm: str
    objects: int = Field(description="Non-zero objects checksummed")


class Verification(BaseModel):
    status: VerifyStatus
    verified_at: datetime
    corrupt_object_count: int
    corrupt_objects: list[int] = Field(
        description="Indexes of the first corrupt objects (offset = index x object size)")
    mode: str | None = Field(
        default=None, description="How the last verify read it: `full`, or `sampled` (a "
                                  "random fraction of the objects)")
    verified_full_at: datetime | None = Field(
        default=None, description="When a verify last read every object")


class RestorePointPublic(BaseModel):
    id: str
    project_id: str
    volume: str = Field(description="cluster/pool/image of the protected volume")
    volume_name: str | None = Field(
        default=None, description="The Cinder volume's name, as Cairn last learnt it (when "
                                  "a backup or a plan named it); null for an RBD image")
    volume_id: str
    target: str = Field(description="Backup target holding the copy")
    kind: RestorePointKind
    status: RestorePointStatus
    status_reason: str | None = Field(description="Why the restore point is in error")
    base_restore_point_id: str | None = Field(
        description="The restore point an incremental was built on")
    full_reason: str | None = Field(
        description="Why an incremental request became a full copy")
    bytes_read: int | None = Field(description="Bytes read from the volume for this copy")
    source_bootable: bool | None = Field(
        description="The Cinder volume was bootable when backed up; a restore into Cinder "
                    "makes its volume bootable. null: not a Cinder volume, or unknown")
    verification: Verification | None = Field(description="Result of the last verify job")
    size_bytes: int | None = Field(description="Size of the volume at the snapshot")
    bytes_copied: int | None = Field(description="Non-zero data written to the backup pool")
    duration_seconds: float | None
    source_snapshot: str
    backup_image: str
    backup_snapshot: str
    checksum: Checksum | None
    plan_id: str | None = Field(description="The plan that made it; its retention applies")
    group_id: str | None = Field(
        default=None, description="The group restore point it belongs to (a run of a plan "
                                  "with consistency group): its volumes at the same instant")
    copied_from_restore_point_id: str | None = Field(
        default=None, description="The restore point this one is a copy of (sent from the "
                                  "backup pool to an object target): it holds the volume at "
                                  "that restore point's instant")
    locked_until: datetime | None = Field(description="No prune or delete before this time")
    created_at: datetime
    completed_at: datetime | None

    @classmethod
    def of(cls, rp: RestorePoint | AnyRow, volume_ref: str | None = None,
           volume_name: str | None = None) -> RestorePointPublic:
        """From the ORM object, or from a list page's row (`volume_ref` and `volume_name`
        then given)."""
        checksum = None
        if rp.checksum_algorithm is not None:
            checksum = Checksum(algorithm=rp.checksum_algorithm,
                                objects=rp.objects_checksummed or 0)
        verification = None
        if rp.verified_at is not None and rp.verify_status is not None:
            verification = Verification(
                status=rp.verify_status, verified_at=rp.verified_at,
                corrupt_object_count=rp.corrupt_object_count or 0,
                corrupt_objects=json.loads(rp.corrupt_objects or "[]"),
                mode=rp.verify_mode, verified_full_at=rp.verified_full_at)
        return cls(
            id=rp.id, project_id=rp.project_id,
            volume=rp.volume.ref if isinstance(rp, RestorePoint) else volume_ref or "",
            volume_name=rp.volume.name if isinstance(rp, RestorePoint) else volume_name,
            volume_id=rp.volume_id,
            target=rp.target, kind=rp.kind, status=rp.status, status_reason=rp.status_reason,
            base_restore_point_id=rp.base_restore_point_id, full_reason=rp.full_reason,
            bytes_read=rp.bytes_read, source_bootable=rp.source_bootable,
            verification=verification,
            size_bytes=rp.size_bytes, bytes_copied=rp.bytes_copied,
            duration_seconds=rp.duration_seconds, source_snapshot=snapshot_name(rp.id),
            backup_image=backup_image_name(rp.volume_id), backup_snapshot=snapshot_name(rp.id),
            checksum=checksum,
            plan_id=rp.plan_id, group_id=rp.group_id, locked_until=rp.locked_until,
            copied_from_restore_point_id=rp.copied_from_restore_point_id,
            created_at=rp.created_at, completed_at=rp.completed_at,
        )


class RestorePointUpdate(BaseModel):
    locked_until: datetime | None = Field(
        description="Keep the restore point until this time (ISO 8601 with zone): neither "
                    "retention nor a delete request removes it before. null unlocks it")


class RestorePointList(BaseModel):
    restore_points: list[RestorePointPublic]
    next_marker: str | None = Field(
        description="Pass as `marker` to get the next page; null on the last page")


class RestorePointGroupPublic(BaseModel):
    id: str
    project_id: str
    plan_id: str
    taken_at: datetime | None = Field(
        description="The instant every member holds (when the RBD group snapshot was taken)")
    complete: bool = Field(description="Every member is available: the group can be restored")
    restore_points: list[RestorePointPublic]
    created_at: datetime
