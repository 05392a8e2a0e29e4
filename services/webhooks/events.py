"""The events Cairn tells webhooks about, as CloudEvents 1.0 (structured JSON), written to
the outbox (`event_deliveries`) in the caller's transaction: the event exists exactly when
what it reports was committed. Workers deliver them (`delivery`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.base import new_id
from services.db import database_now
from services.records.webhooks import EventDelivery, Webhook

TYPE_PREFIX = "org.openstack.cairn."

EVENT_TYPES = (
    "backup.create.start", "backup.create.end", "backup.create.error",
    "backup.restore.start", "backup.restore.end", "backup.restore.error",
    "restore_point.delete.end", "restore_point.delete.error",
    "restore_point.verify.end", "restore_point.verify.error",
    "plan.create.end", "plan.update.end", "plan.delete.end",
    "webhook.test",
)
"""Cinder's names (`backup.create.end`...) for what Cinder also does; Cairn's own for the
rest. A CloudEvent's `type` is the name with TYPE_PREFIX."""

JOB_EVENTS = {"backup": "backup.create", "restore": "backup.restore",
              "delete": "restore_point.delete", "verify": "restore_point.verify"}


def job_event_type(kind: str, succeeded: bool) -> str | None:
    """The event a job's end makes; None for kinds tenants do not hear about (prune)."""
    base = JOB_EVENTS.get(kind)
    return None if base is None else f"{base}.{'end' if succeeded else 'error'}"


def priority_of(event_type: str) -> str:
    """An OpenStack notification's priority: ERROR for `.error` events, else INFO."""
    return "error" if event_type.endswith(".error") else "info"


def job_start_type(kind: str) -> str | None:
    """The event a job's start makes: backups' and restores' only, as in Cinder."""
    return f"{JOB_EVENTS[kind]}.start" if kind in ("backup", "restore") else None


def cloud_event(event_id: str, event_type: str, *, project_id: str, subject: str | None,
                time: datetime, data: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {
        "specversion": "1.0", "id": event_id, "source": f"/cairn/projects/{project_id}",
        "type": TYPE_PREFIX + event_type, "time": time.isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json", "data": data}
    if subject is not None:
        event["subject"] = subject
    return event


def record(session: Session, project_id: str, event_type: str, *, subject: str | None,
           data: dict[str, Any], now: datetime, webhook_id: str | None = None,
           notify_openstack: bool = False) -> list[EventDelivery]:
    """Queue the event for each of the project's enabled webhooks that listen to it (or for
    the one named), and as an OpenStack notification when asked; returns the deliveries
    queued. They are due at once by the database's clock, which the workers that take them
    compare with (`now`, the event's time, is the caller's)."""
    queued: list[EventDelivery] = []
    if notify_openstack and webhook_id is None:
        message = {"priority": priority_of(event_type), "payload": data}
        queued.append(EventDelivery(id=new_id(), webhook_id=None, event_type=event_type,
                                    body=json.dumps(message),
                                    created_at=now))
    query = select(Webhook).where(Webhook.project_id == project_id)
    if webhook_id is not None:
        query = query.where(Webhook.id == webhook_id)
    else:
        query = query.where(Webhook.enabled.is_(True))
    for hook in session.scalars(query):
        wanted = json.loads(hook.event_types)
        if webhook_id is None and wanted and event_type not in wanted:
            continue
        delivery_id = new_id()
        body = cloud_event(delivery_id, event_type, project_id=project_id, subject=subject,
                           time=now, data=data)
        queued.append(EventDelivery(id=delivery_id, webhook_id=hook.id, event_type=event_type,
                                    body=json.dumps(body, separators=(",", ":")),
                                    created_at=now))
    if queued:
        due = database_now(session)
        for delivery in queued:
            delivery.next_attempt_at = due
    session.add_all(queued)
    return queued
