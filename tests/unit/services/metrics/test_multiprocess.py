"""Several worker processes on one host (PROMETHEUS_MULTIPROC_DIR): the process that
answers a scrape answers for all of them, and counts outlive the process that made them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

RECORD = """
from services.metrics import events
for _ in range({n}):
    events.job_finished(kind="backup", project="p1", plan=None, target="local",
                        outcome="failed", reason="storage_unavailable", seconds=42.0,
                        bytes_read=0, bytes_written=1000)
"""

SCRAPE = """
from services.metrics import exposition
body, _ = exposition.render(exposition.registry())
print(body.decode())
"""


def _python(code: str, metrics_dir: Path) -> str:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _sample(text: str, name: str) -> float:
    [line] = [line for line in text.splitlines() if line.startswith(name)]
    return float(line.rsplit(" ", 1)[1])


def test_one_scrape_adds_up_every_process_of_the_host(tmp_path: Path) -> None:
    _python(RECORD.format(n=1), tmp_path)  # a worker that has stopped since
    _python(RECORD.format(n=2), tmp_path)
    scraped = _python(SCRAPE, tmp_path)
    finished = ('cairn_jobs_finished_total{kind="backup",outcome="failed",plan="",'
                'project="p1",reason="storage_unavailable"}')
    assert _sample(scraped, finished) == 3
    assert _sample(scraped, 'cairn_job_duration_seconds_count{kind="backup",outcome="failed"}') == 3
    assert _sample(scraped, 'cairn_job_written_bytes_total{kind="backup",target="local"}') == 3000


def test_without_the_directory_a_process_counts_only_its_own() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    done = subprocess.run([sys.executable, "-c", RECORD.format(n=2) + SCRAPE], env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert 'reason="storage_unavailable"} 2.0' in done.stdout
