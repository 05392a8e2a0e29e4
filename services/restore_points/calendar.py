"""A volume's available restore points counted per day on the user's wall clock, for the
portal's calendar: one query over the days asked, however many restore points the volume
has before them."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext
from datetime import datetime, timedelta, tzinfo

from pydantic import BaseModel, Field
from sqlalchemy import ColumnElement, Date, cast, func, select
from sqlalchemy.exc import DataError
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
    counted = [RestorePoint.volume_id == volume_id,
               RestorePoint.status == RestorePointStatus.AVAILABLE,
               RestorePoint.created_at >= since]
    if not ctx.is_admin:
        counted.append(RestorePoint.project_id == ctx.project_id)
    per_date = None
    if session.get_bind().dialect.name == "postgresql":
        per_date = _per_day_in_postgresql(session, counted, timezone)
    if per_date is None:
        per_date = per_day(session.execute(
            select(RestorePoint.created_at, RestorePoint.kind).where(*counted)).all(), tz)
    return RestorePointCalendar(timezone=timezone, since=since, days=per_date)


def _per_day_in_postgresql(session: Session, counted: list[ColumnElement[bool]],
                           timezone: str) -> list[RestorePointDay] | None:
    """The same counts as `per_day`, grouped by PostgreSQL: a busy volume's span holds
    thousands of restore points, and sending each row to Python cost the portal's page more
    than the rest of its queries. None when PostgreSQL does not know the zone: its names are
    its own tzdata's, which need not be the API host's (`zoneinfo` also takes `localtime`, and
    a zone newer than the database server's tzdata); those are counted in Python."""
    local_date = cast(func.timezone(timezone, RestorePoint.created_at), Date)
    full = func.count().filter(RestorePoint.kind == RestorePointKind.FULL)
    # In a transaction, a refused zone must not end it: the query runs in a savepoint.
    # (A `Database.reading()` session runs in autocommit, which has neither need nor room.)
    autocommit = session.connection().get_execution_options().get(
        "isolation_level") == "AUTOCOMMIT"
    try:
        with nullcontext() if autocommit else session.begin_nested():
            rows = session.execute(
                select(local_date, full, func.count() - full).where(*counted)
                .group_by(local_date).order_by(local_date)).all()
    except DataError:
        return None
    return [RestorePointDay(date=day.isoformat(), full=f, incremental=i) for day, f, i in rows]


def per_day(rows: Iterable[tuple[datetime, str]], tz: tzinfo) -> list[RestorePointDay]:
    """(created_at, kind) rows counted per date in `tz`, oldest first. The local date is
    worked out once per quarter hour (every zone's offset, and every change of it, falls on
    whole quarter hours): a volume backed up every few minutes has thousands of restore
    points in the span."""
    counts: dict[str, list[int]] = {}
    date_of: dict[datetime, str] = {}
    for created_at, kind in rows:
        quarter = created_at.replace(minute=created_at.minute // 15 * 15, second=0,
                                     microsecond=0)
        date = date_of.get(quarter)
        if date is None:
            date = date_of[quarter] = quarter.astimezone(tz).date().isoformat()
        day = counts.setdefault(date, [0, 0])
        day[0 if kind == RestorePointKind.FULL else 1] += 1
    return [RestorePointDay(date=d, full=counts[d][0], incremental=counts[d][1])
            for d in sorted(counts)]
