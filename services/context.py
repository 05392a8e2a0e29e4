"""Who is asking: the project and roles every service call is scoped to."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


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
    cloud_admin: bool = False
    """The admin role in a project whose id `admin_projects` holds (a Keystone project id, or
    under noauth the X-Project-Id). A project's own admin is not one: they administer their
    project only."""

    @property
    def is_admin(self) -> bool:
        return self.cloud_admin

    def acting_for(self, project_id: str) -> RequestContext:
        """This caller working on `project_id`'s objects (an administrator on another
        project's plan): what it creates there belongs to that project."""
        return replace(self, project_id=project_id)

    def sees(self, project_id: str) -> bool:
        """Whether the caller may see a row of `project_id`: its own project's, or any
        project's for an administrator."""
        return self.is_admin or project_id == self.project_id
