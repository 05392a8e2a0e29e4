"""Every ORM model, imported in one place so the metadata is complete (Alembic, tests)."""

from services.base import Base
from services.idempotency.models import IdempotentRequest
from services.jobs.models import Job
from services.plans.models import Plan, PlanVolume
from services.quotas.models import ProjectQuota
from services.restore_points.models import RestorePoint
from services.volumes.models import Volume, VolumeLock

__all__ = ["Base", "IdempotentRequest", "Job", "Plan", "PlanVolume", "ProjectQuota",
           "RestorePoint", "Volume", "VolumeLock"]
