"""`--wait`: follow a job to its end with a progress bar on stderr."""

from __future__ import annotations

import sys
import time
from typing import Any

from cli.api import Api

DONE = ("succeeded", "failed", "cancelled", "skipped")
WIDTH = 30


def wait(api: Api, job_id: str, *, interval: float = 0.5, timeout: float = 24 * 3600,
         bar: bool = True) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = api.call("GET", f"/v1/jobs/{job_id}")
    while job["status"] not in DONE and time.monotonic() < deadline:
        if bar:
            _draw(job)
        time.sleep(interval)
        job = api.call("GET", f"/v1/jobs/{job_id}")
    if bar:
        _draw(job)
        sys.stderr.write("\n")
        sys.stderr.flush()
    return job


def _draw(job: dict[str, Any]) -> None:
    progress = job.get("progress") or {}
    percent = progress.get("percent")
    if job["status"] == "succeeded":
        percent = 100.0
    filled = int(WIDTH * (percent or 0) / 100)
    rate = progress.get("rate_bytes_per_second", progress.get("throughput_bytes_per_second"))
    speed = f" {rate / 2**20:7.1f} MiB/s" if rate else ""
    shown = f"{percent:5.1f}%" if percent is not None else "  ...%"
    sys.stderr.write(f"\r{job['kind']} {job['id'][:8]} [{'#' * filled}{'.' * (WIDTH - filled)}]"
                     f" {shown}{speed} {job['status']:<10}")
    sys.stderr.flush()
