"""A group restore says where every volume goes, in exactly one way."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.restore_points.schemas import GroupRestoreCreate


def test_a_group_restore_names_exactly_one_destination() -> None:
    with pytest.raises(ValidationError, match="exactly one of name_prefix"):
        GroupRestoreCreate()
    with pytest.raises(ValidationError, match="exactly one of name_prefix"):
        GroupRestoreCreate(name_prefix="x-", in_place=True)
    assert GroupRestoreCreate(in_place=True).in_place
    assert GroupRestoreCreate(target_prefix="volumes/back-").target_prefix == "volumes/back-"
