"""What every chunk-format target shares: a listing of its manifests is bounded by Cairn's
records (one per restore point row on the target, a tenth and MANIFESTS_MARGIN more), so
what garbage collection and the orphan scan keep of it cannot grow with what the storage's
holder lists; names that are not Cairn's count neither against that bound nor are kept;
and the orphan scan of each target ends within its time, the others scanned still."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import cast

import pytest

from services.db import Database
from services.errors import StorageError
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RestorePointStatus
from services.storage.chunk_backend import ChunkBackend, StoredObject
from services.targets.chunked import (
    MANIFESTS_MARGIN,
    STRANGERS_LOGGED,
    listed_manifests,
    manifests_bound,
)


class Endless:
    """Lists manifests for ever (an endpoint whose pages never end)."""

    def __init__(self) -> None:
        self.given = 0

    def list(self, prefix: str = "", *, deadline: float, most: int | None = None
             ) -> Iterator[StoredObject]:
        assert prefix == "manifests/"
        while True:
            self.given += 1
            yield StoredObject(f"manifests/p/00000000-0000-4000-8000-{self.given:012d}", 1,
                               datetime.now(UTC))


def _rows(db: Database, target: str, count: int) -> None:
    with db.session() as session:
        session.add(Volume(id="v", project_id="p", cluster="ceph-a", pool="volumes",
                           image="v"))
        session.flush()
        session.add_all(RestorePoint(project_id="p", volume_id="v", target=target,
                                     status=RestorePointStatus.DELETED) for _ in range(count))
        session.add(RestorePoint(project_id="p", volume_id="v", target="elsewhere",
                                 status=RestorePointStatus.AVAILABLE))


@pytest.mark.parametrize("rows", [0, 20])
def test_a_listing_of_more_manifests_than_cairn_can_have_written_is_refused(
        db: Database, rows: int) -> None:
    _rows(db, "t", rows)
    bound = manifests_bound(db, "t")
    assert bound == rows + rows // 10 + MANIFESTS_MARGIN  # rows in any state, this target's
    backend = Endless()
    listed = listed_manifests(db, cast(ChunkBackend, backend), "t", deadline=math.inf)
    assert len([next(listed) for _ in range(bound)]) == bound
    with pytest.raises(StorageError, match=f"more manifests than the {bound}"):
        next(listed)
    assert backend.given == bound + 1


class Planted:
    """Lists `junk` names Cairn never gives a manifest, then one Cairn manifest."""

    def __init__(self, junk: int) -> None:
        self.junk = junk

    def list(self, prefix: str = "", *, deadline: float, most: int | None = None
             ) -> Iterator[StoredObject]:
        now = datetime.now(UTC)
        for n in range(self.junk):
            yield StoredObject(f"manifests/zz-junk-{n:05d}", 1, now)
        yield StoredObject(f"manifests/p/{RP}", 1, now)


RP = "0b5e4f9a-1111-4222-8333-944445555666"


def test_names_that_are_not_cairns_manifests_neither_count_nor_are_given(
        db: Database, caplog: pytest.LogCaptureFixture) -> None:
    # More planted names than the bound allows stopped every collection and orphan scan.
    junk = MANIFESTS_MARGIN + 1
    called = []
    listed = list(listed_manifests(db, cast(ChunkBackend, Planted(junk)), "t",
                                   deadline=math.inf, stranger=lambda: called.append(1)))
    assert [stored.key for stored in listed] == [f"manifests/p/{RP}"]
    assert len(called) == junk
    assert caplog.text.count("is not a Cairn manifest") == STRANGERS_LOGGED
    assert f"holds {junk} objects under its manifests that are not" in caplog.text
