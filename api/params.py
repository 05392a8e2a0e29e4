"""Path and query parameters with their formats, checked before anything reaches SQL and
declared in the OpenAPI document: a NUL byte or a 10 kB string in an id answers 422, not a
database error."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from api.errors import VOLUME_FILTER
from services.formats import PROJECT, UUID, VOLUME_REF

PlanId = Annotated[str, Path(pattern=UUID, description="The plan's id (a UUID)")]
WebhookId = Annotated[str, Path(pattern=UUID, description="The webhook's id (a UUID)")]
JobId = Annotated[str, Path(pattern=UUID, description="The job's id (a UUID)")]
RestorePointId = Annotated[str, Path(pattern=UUID,
                                     description="The restore point's id (a UUID)")]
CinderVolumeId = Annotated[str, Path(pattern=UUID, description="The Cinder volume's id")]
ProjectId = Annotated[str, Path(pattern=PROJECT, description="The project's id")]
Marker = Annotated[str | None, Query(pattern=UUID,
                                     description="`next_marker` of the previous page")]
PlanFilter = Annotated[str | None, Query(pattern=UUID, description="Only what this plan made")]
VolumeFilter = Annotated[str | None, Query(pattern=VOLUME_REF, description=VOLUME_FILTER)]
