from __future__ import annotations

from pydantic import BaseModel, Field


class QuotaLimits(BaseModel):
    """None (null) means unlimited."""

    restore_points: int | None = Field(default=None, ge=0, le=2**53)
    gigabytes: int | float | None = Field(
        default=None, ge=0, le=2**32,
        description="Storage limit in GiB (2^30 bytes); fractions allowed (0.5 is 512 MiB), "
                    "kept to the byte and answered as set (an integer when whole). Counts "
                    "what the project's restore points hold on their targets, before "
                    "compression (docs/scheduling.md, Quotas)")


class QuotaUsage(BaseModel):
    restore_points: int = Field(description="Restore points not deleted (creating included)")
    gigabytes_stored: float = Field(description="What the project's restore points hold on "
                                                "their targets, in GiB (6 decimals), and the "
                                                "room the ones being made reserve")
    bytes_stored: int = Field(description="The same in bytes")


class ProjectQuotaPublic(BaseModel):
    project_id: str
    limits: QuotaLimits
    usage: QuotaUsage
