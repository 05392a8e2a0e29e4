"""A job followed to its end (`--wait` in the `cairn` CLI and the `openstack` plugin): its
state asked for every half second, and a progress bar on stderr while it runs."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from cairnclient.client import JSON, Client

DONE = ("succeeded", "failed", "cancelled", "skipped")
WIDTH = 30


def wait(client: Client, job_id: str, *, interval: float = 0.5, timeout: float = 24 * 3600,
         bar: bool = True, out: TextIO | None = None) -> JSON:
    """The job once it ended (or as it is when `timeout` passed)."""
    out = out or sys.stderr
    deadline = time.monotonic() + timeout
    job: JSON = client.jobs.get(job_id)
    while job["status"] not in DONE and time.monotonic() < deadline:
        if bar:
            _draw(job, out)
        time.sleep(interval)
        job = client.jobs.get(job_id)
    if bar:
        _draw(job, out)
        out.write("\n")
        out.flush()
    return job


def failure(job: JSON) -> str:
    """Why a job followed to its end did not succeed, in a line."""
    error = job.get("error") or {}
    return f"job {job['id']} {job['status']}: {error.get('message', '')}"


def _draw(job: dict[str, Any], out: TextIO) -> None:
    progress = job.get("progress") or {}
    percent = progress.get("percent")
    if job["status"] == "succeeded":
        percent = 100.0
    filled = int(WIDTH * (percent or 0) / 100)
    rate = progress.get("rate_bytes_per_second", progress.get("throughput_bytes_per_second"))
    speed = f" {rate / 2**20:7.1f} MiB/s" if rate else ""
    shown = f"{percent:5.1f}%" if percent is not None else "  ...%"
    out.write(f"\r{job['kind']} {job['id'][:8]} [{'#' * filled}{'.' * (WIDTH - filled)}]"
              f" {shown}{speed} {job['status']:<10}")
    out.flush()
