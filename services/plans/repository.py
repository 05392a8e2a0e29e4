from __future__ import annotations

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.errors import InvalidMarker, PlanNotFound
from services.records.plans import Plan


def get(session: Session, ctx: RequestContext, plan_id: str) -> Plan:
    plan = session.get(Plan, plan_id)
    # Another project's plan is reported exactly like a missing one.
    if plan is None or not ctx.sees(plan.project_id):
        raise PlanNotFound(f"plan {plan_id!r} not found", plan_id=plan_id)
    return plan


def list_page(session: Session, ctx: RequestContext, *, limit: int,
              marker: str | None) -> tuple[list[Plan], str | None]:
    """By name; returns the page and the marker of the next one."""
    stmt = select(Plan)
    if not ctx.is_admin:  # administrators see every project's plans
        stmt = stmt.where(Plan.project_id == ctx.project_id)
    if marker is not None:
        last = session.get(Plan, marker)
        if last is None or not ctx.sees(last.project_id):
            raise InvalidMarker(f"marker {marker!r} is not a plan of this project")
        stmt = stmt.where(tuple_(Plan.name, Plan.id) > tuple_(last.name, last.id))
    rows = list(session.scalars(stmt.order_by(Plan.name, Plan.id).limit(limit + 1)))
    next_marker = rows[limit - 1].id if len(rows) > limit else None
    return rows[:limit], next_marker
