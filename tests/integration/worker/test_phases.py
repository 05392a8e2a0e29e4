"""Where a job's time went: a backup publishes each phase of its last attempt, and the
phases account for the job's duration."""

from __future__ import annotations

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph

BACKUP_PHASES = {"queue_wait", "claim", "prepare", "open", "snapshot", "plan", "copy",
                 "manifest", "target_snapshot", "commit", "aftercare"}


def test_a_backup_publishes_its_phases(stack: Stack, volumes_pool: rados.Ioctx) -> None:
    name = ceph.unique_name("phases")
    ceph.make_mixed_image(volumes_pool, name, size=13 * MiB + 1, seed=81)
    try:
        job = backup(stack, name)
        phases = job["timings"]["phases"]
        assert set(phases) == BACKUP_PHASES
        assert all(seconds >= 0 for seconds in phases.values())
        assert phases["copy"] == pytest.approx(job["timings"]["copy_seconds"], abs=0.05)
        worked = sum(v for k, v in phases.items() if k not in ("queue_wait", "claim"))
        assert worked <= job["timings"]["duration_seconds"] + 0.05
        # Everything but the job's final write is in a phase (the job's duration starts
        # inside the claim).
        assert worked + phases["claim"] >= 0.75 * job["timings"]["duration_seconds"], phases
    finally:
        ceph.remove_image(volumes_pool, name)
