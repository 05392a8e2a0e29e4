"""Who is asking: the project and roles every service call is scoped to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RequestContext:
    project_id: str
    roles: frozenset[str] = frozenset()
