from __future__ import annotations

from pydantic import BaseModel, Field


class BackupCreate(BaseModel):
    volume: str = Field(
        min_length=1, max_length=512,
        description="The volume to back up, as the RBD image `cluster/pool/image`",
        examples=["ceph-a/volumes/demo"],
    )
    target: str | None = Field(
        default=None, max_length=64,
        description="Backup target name; the service's default target when omitted",
        examples=["local"],
    )
    qos_bytes_per_second: int | None = Field(
        default=None, gt=0, description="Upper bound on the backup's read rate")
