"""Every ORM model, imported in one place so the metadata is complete (Alembic, tests)."""

from services.base import Base
from services.records.groups import RestorePointGroup
from services.records.idempotency import IdempotentRequest
from services.records.jobs import Job
from services.records.object_target_keys import ObjectTargetKey
from services.records.plans import Plan, PlanVolume
from services.records.quotas import ProjectQuota
from services.records.restore_points import RestorePoint
from services.records.target_leases import TargetLease, TargetLeaseGate
from services.records.volumes import Volume, VolumeLock
from services.records.webhooks import EventDelivery, Webhook, WebhookSealingKey

__all__ = [
           "Base",
           "EventDelivery",
           "IdempotentRequest",
           "Job",
           "ObjectTargetKey",
           "Plan",
           "PlanVolume",
           "ProjectQuota",
           "RestorePoint",
           "RestorePointGroup",
           "TargetLease",
           "TargetLeaseGate",
           "Volume",
           "VolumeLock",
           "Webhook",
           "WebhookSealingKey",
]
