"""What a plan protects: the volumes listed, or a Cinder group's volumes; never both, never
neither, and a group plan is crash-consistent together unless told otherwise."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.plans.schemas import PlanCreate, PlanUpdate
from services.status import Consistency

RULES = [{"cron": "0 2 * * *"}]
GROUP = "1f0e4c5a-6b1d-4a53-9c9e-0d6b2f3a7e21"


def test_a_cinder_group_stands_for_the_volumes_and_is_one_instant_by_default() -> None:
    plan = PlanCreate.model_validate({"name": "app", "cinder_group": GROUP, "rules": RULES})
    assert plan.volumes == []
    assert plan.chosen_consistency() == Consistency.GROUP
    told = PlanCreate.model_validate({"name": "app", "cinder_group": GROUP, "rules": RULES,
                                      "consistency": "volume"})
    assert told.chosen_consistency() == Consistency.VOLUME


def test_volumes_alone_keep_per_volume_snapshots_by_default() -> None:
    plan = PlanCreate.model_validate({"name": "db", "volumes": ["ceph-a/volumes/x"],
                                      "rules": RULES})
    assert plan.chosen_consistency() == Consistency.VOLUME


@pytest.mark.parametrize(("body", "says"), [
    ({"volumes": ["ceph-a/volumes/x"], "cinder_group": GROUP}, "not both"),
    ({}, "at least one volume"),
    ({"volumes": []}, "at least one volume"),
    ({"volumes": ["ceph-a/volumes/x", "ceph-a/volumes/x"]}, "more than once"),
    ({"cinder_group": "../groups"}, "pattern"),
    ({"cinder_group": ""}, "pattern"),
])
def test_a_plan_names_what_it_protects_exactly_once(body: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        PlanCreate.model_validate({"name": "p", "rules": RULES, **body})


def test_a_change_cannot_list_volumes_and_follow_a_group_at_once() -> None:
    with pytest.raises(ValidationError, match="not both"):
        PlanUpdate.model_validate({"volumes": ["ceph-a/volumes/x"], "cinder_group": GROUP})
    stop = PlanUpdate.model_validate({"volumes": ["ceph-a/volumes/x"], "cinder_group": None})
    assert stop.cinder_group is None
    assert "cinder_group" in stop.model_fields_set
    with pytest.raises(ValidationError, match="at least one volume"):
        PlanUpdate.model_validate({"volumes": []})
