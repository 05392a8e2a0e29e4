from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import SettingsDep, allowed
from api.errors import error_responses
from services import targets

router = APIRouter(prefix="/v1/targets", tags=["targets"])


class TargetPublic(BaseModel):
    name: str
    kind: Literal["rbd", "s3", "directory"] = Field(
        description="rbd: an RBD pool on a Ceph cluster (instant restores possible); s3: an "
        "object store holding deduplicated, encrypted chunks (off site); directory: the same "
        "chunks in a directory (a local file system or an NFS mount)")
    default: bool = Field(description="Used when a plan or backup names no target")
    max_jobs: int = Field(description="Copy jobs running at once against this target")


class TargetList(BaseModel):
    targets: list[TargetPublic]


@router.get("", response_model=TargetList, responses=error_responses(401, 403),
            summary="Backup targets a plan or backup may name",
            dependencies=[allowed("target:list")])
def list_targets(settings: SettingsDep) -> TargetList:
    """Targets are configured by the operator (`CAIRN_BACKUP_TARGETS`,
    `CAIRN_OBJECT_TARGETS`, `CAIRN_DIRECTORY_TARGETS`)."""
    # `kind` is validated against the schema's Literal: the API's promise of which kinds
    # exist, which a new kind extends (with the portal's label for it).
    return TargetList(targets=[
        TargetPublic(name=target.name, kind=target.kind,
                     default=target.name == settings.default_backup_target,
                     max_jobs=target.max_jobs)
        for target in targets.every(settings)])
