"""Who may act on a Cinder volume or group that Cinder showed the caller: Cinder shows a
project's admin every project's, so the owner it names decides."""

from __future__ import annotations

from services.context import RequestContext
from services.volumes.ownership import foreign

A, B = "a" * 32, "b" * 32


def test_another_projects_volume_is_foreign_to_a_project_admin() -> None:
    project_admin = RequestContext(project_id=A, roles=frozenset({"admin", "member"}))
    assert foreign(B, project_admin)
    assert not foreign(A, project_admin)


def test_an_unnamed_owner_is_the_callers_project() -> None:
    # Cinder names the owner to administrators only; anyone else sees its own volumes.
    assert not foreign(None, RequestContext(project_id=A, roles=frozenset({"member"})))


def test_the_cloud_admin_acts_on_every_project() -> None:
    cloud_admin = RequestContext(project_id=A, roles=frozenset({"admin"}), cloud_admin=True)
    assert not foreign(B, cloud_admin)
    assert not foreign(B, cloud_admin.acting_for(A))
