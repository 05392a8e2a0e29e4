from __future__ import annotations

from pydantic import BaseModel, Field

from services.formats import FreeText, VolumeRef
from services.limits.qos_bounds import BytesPerSecond, OpsPerSecond
from services.status import RestorePointKind


class BackupCreate(BaseModel):
    volume: VolumeRef = Field(
        description="The volume to back up: a Cinder volume id, or (administrators, or "
                    "noauth) the RBD image `cluster/pool/image`",
        examples=["ceph-a/volumes/demo"],
    )
    target: FreeText | None = Field(
        default=None, max_length=64,
        description="Backup target name; the service's default target when omitted",
        examples=["local"],
    )
    qos_bytes_per_second: BytesPerSecond | None = Field(
        default=None, description="Upper bound on the backup's read rate")
    qos_ops_per_second: OpsPerSecond | None = Field(
        default=None, description="Upper bound on the backup's read operations per second")
    kind: RestorePointKind = Field(
        default=RestorePointKind.INCREMENTAL,
        description="`incremental` copies only what changed since the volume's newest restore "
                    "point on the target (a full copy when there is none: the restore point's "
                    "`full_reason` says why); `full` copies everything")
