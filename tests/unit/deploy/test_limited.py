"""deploy/local/limited.sh: `make test` ends a tier that outlives its limit, with the stacks
of its Python processes printed first (the watchdog's SIGUSR1), and lets a tier that ends
in time keep its own exit status, holding none of the run's output open."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
LIMITED = REPO / "deploy" / "local" / "limited.sh"

HANGS = '''
import time

from tests.support.watchdog import Watchdog


def hangs_where_no_watchdog_looks():
    time.sleep(600)


Watchdog()  # what every pytest process of the suite has (tests/conftest.py)
hangs_where_no_watchdog_looks()
'''


def _limited(limit: float, *command: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str],
                                                                  float]:
    script = f'set -euo pipefail; . "{LIMITED}"; limited {limit} "$@"'
    env = {**os.environ, "PYTHONPATH": str(REPO), "CAIRN_LIMITED_DUMP_SECONDS": "1",
           "CAIRN_LIMITED_TERM_SECONDS": "2"}
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", script, "limited", *command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return done, time.monotonic() - started


def test_a_tier_past_its_limit_prints_its_stacks_and_is_ended(tmp_path: Path) -> None:
    (tmp_path / "hangs.py").write_text(HANGS)
    done, took = _limited(2, sys.executable, "hangs.py", cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert took < 20, took
    assert "this tier still runs after 2 s" in out, out
    # The stacks came from the hung process, with its own frame in them.
    assert "in hangs_where_no_watchdog_looks" in out, out


def test_a_tier_in_time_keeps_its_status_and_holds_nothing_open(tmp_path: Path) -> None:
    # capture_output reads to the end of the output: a guard, or its wait, still holding
    # it would keep this call (and make's reader, in a run) waiting for the whole limit.
    done, took = _limited(300, "bash", "-c", "exit 3", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert took < 10, took
    assert done.stdout == "", done.stdout
