"""Every ORM model, imported in one place so the metadata is complete (Alembic, tests)."""

from services.base import Base
from services.jobs.models import Job
from services.restore_points.models import RestorePoint
from services.volumes.models import Volume

__all__ = ["Base", "Job", "RestorePoint", "Volume"]
