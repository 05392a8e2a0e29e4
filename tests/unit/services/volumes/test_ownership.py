"""Who may act on a Cinder volume or group that Cinder showed the caller: Cinder shows a
project's admin every project's, so the owner it names decides; where Cinder named none to
the caller's token, Cairn's service user is asked, never the caller's project assumed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from services.context import RequestContext
from services.errors import CinderError, InvalidInput, VolumeNotFound
from services.openstack.cinder import CinderGroup, CinderVolume
from services.volumes.ownership import caller_group, caller_volume, foreign

A, B = "a" * 32, "b" * 32
VOLUME = "3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41"


def _volume(owner: str | None) -> CinderVolume:
    return CinderVolume(id=VOLUME, name="v", size_gb=1, status="available", attached_to=(),
                        volume_type=None, bootable=False, project_id=owner)


@dataclass
class _Api:
    owner: str | None
    asked: int = 0

    def get(self, volume_id: str) -> CinderVolume:
        self.asked += 1
        return _volume(self.owner)

    def group(self, group_id: str, *, field: str) -> CinderGroup:
        self.asked += 1
        return CinderGroup(id=group_id, project_id=self.owner, volume_ids=())


@dataclass
class _Gateway:
    """Cinder as a caller's token sees it (`user`) and as Cairn's service user (`service`)."""

    user: _Api
    service: _Api

    def for_user(self, ctx: RequestContext) -> _Api:
        return self.user

    def as_service(self) -> _Api:
        return self.service


MEMBER = RequestContext(project_id=A, roles=frozenset({"member"}))


def test_an_owner_cinder_did_not_name_to_the_caller_is_asked_of_the_service_user() -> None:
    # A Cinder policy that shows a role other projects' volumes without naming their owner
    # (before, such a volume was taken to be the caller's).
    theirs = _Gateway(_Api(owner=None), _Api(owner=B))
    with pytest.raises(VolumeNotFound, match=f"Cinder volume {VOLUME} not found"):
        caller_volume(theirs, MEMBER, VOLUME)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="not found"):
        caller_group(theirs, MEMBER, VOLUME)  # type: ignore[arg-type]
    mine = _Gateway(_Api(owner=None), _Api(owner=A))
    assert caller_volume(mine, MEMBER, VOLUME).project_id == A  # type: ignore[arg-type]


def test_an_owner_nobody_names_is_refused_not_assumed() -> None:
    hidden = _Gateway(_Api(owner=None), _Api(owner=None))
    with pytest.raises(CinderError, match="cannot tell whose it is"):
        caller_volume(hidden, MEMBER, VOLUME)  # type: ignore[arg-type]


def test_an_owner_the_caller_was_told_costs_no_second_call() -> None:
    named = _Gateway(_Api(owner=A), _Api(owner=A))
    caller_volume(named, MEMBER, VOLUME)  # type: ignore[arg-type]
    assert (named.user.asked, named.service.asked) == (1, 0)


def test_another_projects_volume_is_foreign_to_a_project_admin() -> None:
    project_admin = RequestContext(project_id=A, roles=frozenset({"admin", "member"}))
    assert foreign(B, project_admin)
    assert not foreign(A, project_admin)


def test_an_unnamed_owner_in_a_list_is_the_callers_project() -> None:
    # Cinder lists a token's own project's volumes (Cairn never asks all_tenants with a
    # caller's token), and names the owner to administrators only.
    assert not foreign(None, RequestContext(project_id=A, roles=frozenset({"member"})))


def test_the_cloud_admin_acts_on_every_project() -> None:
    cloud_admin = RequestContext(project_id=A, roles=frozenset({"admin"}), cloud_admin=True)
    assert not foreign(B, cloud_admin)
    assert not foreign(B, cloud_admin.acting_for(A))
