"""Rows the list benchmarks load straight into Cairn's database: a finished backup job as
the worker leaves it (bench/scheduler.py, bench/portal.py)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from services.status import JobStatus

COPIED = 1 << 24


def succeeded_backup_job(project: str, volume_id: str, restore_point_id: str,
                         at: datetime) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "project_id": project, "kind": "backup",
            "status": JobStatus.SUCCEEDED, "volume_id": volume_id,
            "restore_point_id": restore_point_id, "target": "local", "attempt": 1,
            "max_attempts": 3, "bytes_done": COPIED, "read_seconds": 1.0,
            "write_seconds": 1.0, "qos_wait_seconds": 0.0, "engine_seconds": 0.1,
            "copy_seconds": 1.0, "bytes_read": COPIED, "bytes_written": COPIED,
            "bytes_resumed": 0, "created_at": at, "queued_at": at, "started_at": at,
            "finished_at": at}
