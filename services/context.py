"""Who is asking: the project and roles every service call is scoped to."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RequestContext:
    project_id: str
    roles: frozenset[str] = frozenset()
    user_id: str | None = None
    token: str | None = field(default=None, repr=False)
    """The caller's Keystone token: Cinder calls made for the caller carry it, so Cinder
    itself decides what the caller may see and create."""
    endpoints: dict[str, str] = field(default_factory=dict, compare=False)
    """The caller's catalog (service type → URL), from the token."""

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles

    def sees(self, project_id: str) -> bool:
        """Whether the caller may see a row of `project_id`: its own project's, or any
        project's for an administrator."""
        return self.is_admin or project_id == self.project_id
