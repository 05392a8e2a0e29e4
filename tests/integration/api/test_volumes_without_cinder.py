"""A Cairn without Cinder (`make up`'s noauth stack) lists the RBD images of its volume pools
as the project's volumes, with the same answer a Cinder volume gets: the plans that cover
it, its restore points, its last backup. The portal's Volumes page reads this list."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
import rados

from tests.integration.api.test_plans import create, ref, run_now
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph


def _listed(stack: Stack, volume: str, headers: dict[str, str]) -> dict[str, Any]:
    """The volume's row in GET /v1/volumes, read page after page (the pool holds every
    test's images)."""
    marker: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 200, **({"marker": marker} if marker else {})}
        response = stack.get("/v1/volumes", headers, **params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert all(not v["id"].split("/")[-1].startswith("cairn") for v in page["volumes"])
        for found in page["volumes"]:
            if found["id"] == volume:
                return dict(found)
        marker = page["next_marker"]
        assert marker is not None, f"{volume} not listed"


def test_the_images_of_the_volume_pools_are_the_volumes_with_their_protection(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    project = {"X-Project-Id": ceph.unique_name("no-cinder"), "X-Roles": "member"}
    other = {"X-Project-Id": ceph.unique_name("no-cinder-other"), "X-Roles": "member"}
    name = ceph.unique_name("no-cinder-vol")
    ceph.make_mixed_image(volumes_pool, name, size=20 * MiB, seed=36)
    images.append(name)
    volume = ref(name)

    before = _listed(stack, volume, project)
    assert (before["name"], before["kind"], before["size_bytes"], before["size_gb"]) == (
        name, "rbd_image", 20 * MiB, 1)
    assert (before["protected"], before["plans"], before["restore_points"]) == (False, [], 0)
    assert before["newest_restore_point"] is None
    assert before["last_backup"] is None

    plan = create(stack, {"name": "nightly", "volumes": [volume],
                          "rules": [{"kind": "incremental", "cron": "0 3 * * *"}]}, project)
    [job] = run_now(stack, plan["id"], project)

    after = _listed(stack, volume, project)
    assert after["protected"] is True
    assert [p["name"] for p in after["plans"]] == ["nightly"]
    assert after["restore_points"] == 1
    assert after["newest_restore_point"]["id"] == job["restore_point_id"]
    assert after["last_backup"]["job_id"] == job["id"]
    assert after["last_backup"]["status"] == "succeeded"
    # One volume by the id the list gave, its slashes as they are or encoded.
    for path in (volume, quote(volume, safe="")):
        one = stack.get(f"/v1/volumes/{path}", project)
        assert one.status_code == 200, one.text
        assert _aged_out(one.json()) == _aged_out(after)
    # Protection is the project's own: another project sees the image unprotected.
    assert _listed(stack, volume, other)["protected"] is False

    # The id is the one backups and the restore point filter take.
    points = stack.get("/v1/restore-points", project, volume=volume).json()["restore_points"]
    assert [p["id"] for p in points] == [job["restore_point_id"]]


def test_a_volume_outside_the_volume_pools_is_not_found(stack: Stack) -> None:
    missing = stack.get(f"/v1/volumes/{ref(ceph.unique_name('never-made'))}")
    assert missing.status_code == 404, missing.text
    outside = stack.get("/v1/volumes/ceph-a/backups/anything")
    assert outside.status_code == 404, outside.text
    bad = stack.get("/v1/volumes", marker="ceph-a/backups/x")
    assert bad.status_code == 422, bad.text


def _aged_out(volume: dict[str, Any]) -> dict[str, Any]:
    """The answer without the newest restore point's age, which grows between two reads."""
    newest = volume.get("newest_restore_point")
    if newest is None:
        return volume
    return {**volume, "newest_restore_point": {k: v for k, v in newest.items()
                                               if k != "age_seconds"}}
