"""The restore point calendar on the real stack: a volume's available restore points counted
per day of the user's timezone, full and incremental apart; deleted ones, other volumes and
other projects not counted; a bad zone refused with the reason."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup
from tests.support.stack import HEADERS, Stack

# The calendar: PostgreSQL counts the days in SQL, SQLite in Python.
pytestmark = [pytest.mark.ceph, pytest.mark.both_databases]


def test_restore_points_are_counted_per_day_of_the_users_zone(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    name, other = ceph.unique_name("days"), ceph.unique_name("days-other")
    for seed, image in enumerate((name, other)):
        ceph.make_mixed_image(volumes_pool, image, size=20 * MiB, seed=seed + 90)
        images.append(image)
    full = backup(stack, name, kind="full")
    backup(stack, name)
    dropped = backup(stack, name)
    backup(stack, other)
    deleted = stack.client.delete(f"/v1/restore-points/{dropped['restore_point_id']}",
                                  headers=HEADERS)
    assert deleted.status_code == 202, deleted.text
    stack.wait_job(deleted.json()["id"])
    volume = f"ceph-a/volumes/{name}"

    made = datetime.fromisoformat(
        stack.get(f"/v1/restore-points/{full['restore_point_id']}").json()["created_at"])
    # Kiritimati (UTC+14) and Pago Pago (UTC-11) are never on the same date: each counts the
    # backups on its own day.
    for zone in ("Pacific/Kiritimati", "Pacific/Pago_Pago"):
        answer = stack.get("/v1/restore-points/days", volume=volume, timezone=zone, days=3)
        assert answer.status_code == 200, answer.text
        days = answer.json()["days"]
        assert days == [{"date": made.astimezone(ZoneInfo(zone)).date().isoformat(),
                         "full": 1, "incremental": 1}], days
        since = datetime.fromisoformat(answer.json()["since"]).astimezone(ZoneInfo(zone))
        assert (since.hour, since.minute) == (0, 0)
        assert timedelta(days=2) <= made - since < timedelta(days=3)

    refused = stack.get("/v1/restore-points/days", volume=volume, timezone="Mars/Olympus")
    assert refused.status_code == 422, refused.text
    assert "unknown timezone 'Mars/Olympus'" in refused.json()["error"]["message"]
    assert stack.get("/v1/restore-points/days", volume=volume, days=0).status_code == 422
    stranger = {"X-Project-Id": "someone-else", "X-Roles": "member"}
    assert stack.get("/v1/restore-points/days", stranger, volume=volume).json()["days"] == []
