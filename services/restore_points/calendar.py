"""A volume's available restore points counted per day on the user's wall clock, for the
portal's calendar: one query over the days asked, however many restore points the volume
has before them."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from services.clock import zone
from services.context import RequestContext
from services.records.restore_points import RestorePoint
from services.status import RestorePointKind, RestorePointStatus


class RestorePointDay(BaseModel):
    date: str = Field(description="The day, YYYY-MM-DD, in `timezone`")
    full: int
    incremental: int


class RestorePointCalendar(BaseModel):
    timezone: str
    since: datetime = Field(description="The first instant counted (UTC)")
    days: list[RestorePointDay] = Field(description="Days with at least one available "
                                                    "restore point, oldest first")


def calendar(session: Session, ctx: RequestContext, volume_id: str, timezone: str,
             days: int, now: datetime) -> RestorePointCalendar:
    tz = zone(timezone)
    local_now = now.astimezone(tz)
    since = (local_now.replace(hour=0, minute=0, second=0, microsecond=0)
             - timedelta(days=days - 1))
    stmt = select(RestorePoint.created_at, RestorePoint.kind).where(
        RestorePoint.volume_id == volume_id,
        RestorePoint.status == RestorePointStatus.AVAILABLE,
        RestorePoint.created_at >= since)
    if not ctx.is_admin:
        stmt = stmt.where(RestorePoint.project_id == ctx.project_id)
    counted: dict[str, RestorePointDay] = {}
    for created_at, kind in session.execute(stmt):
        date = created_at.astimezone(tz).date().isoformat()
        day = counted.setdefault(date, RestorePointDay(date=date, full=0, incremental=0))
        if kind == RestorePointKind.FULL:
            day.full += 1
        else:
            day.incremental += 1
    return RestorePointCalendar(timezone=timezone, since=since,
                                days=[counted[d] for d in sorted(counted)])
