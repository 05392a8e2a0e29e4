from __future__ import annotations

from pydantic import BaseModel, Field


class QuotaLimits(BaseModel):
    """None (null) means unlimited."""

    restore_points: int | None = Field(default=None, ge=0, le=2**53)
    gigabytes: int | None = Field(default=None, ge=0, le=2**53)


class QuotaUsage(BaseModel):
    restore_points: int = Field(description="Restore points not deleted (creating included)")
    gigabytes_stored: float = Field(description="Sum of the bytes each restore point copied, "
                                                "in GiB")


class ProjectQuotaPublic(BaseModel):
    project_id: str
    limits: QuotaLimits
    usage: QuotaUsage
