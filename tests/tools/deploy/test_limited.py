"""deploy/local/limited.sh: `make test` ends a tier that outlives its limit, with the stacks
of its Python processes printed first (the watchdog's SIGUSR1), everything below it
included, and lets a tier that ends in time keep its own exit status."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = REPO / "deploy" / "local"

HANGS = '''
import subprocess
import time

from tests.support.watchdog import Watchdog


def hangs_where_no_watchdog_looks():
    time.sleep(600)


Watchdog()  # what every pytest process of the suite has (tests/conftest.py)
# A process below it that is no Python and holds the run's output, as a server a test
# starts would: it must go with the tier, or the run's reader would wait for it.
subprocess.Popen(["sleep", "600"])
hangs_where_no_watchdog_looks()
'''


def _limited(limit: str, *command: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str],
                                                                float]:
    # As test.sh sources it: under set -euo pipefail and lib.sh's ERR trap.
    script = (f'set -euo pipefail; . "{SCRIPTS}/lib.sh"; . "{SCRIPTS}/limited.sh"; '
              f'limited {limit} "$@"')
    env = {**os.environ, "PYTHONPATH": str(REPO), "CAIRN_LIMITED_DUMP_SECONDS": "1",
           "CAIRN_LIMITED_TERM_SECONDS": "2"}
    started = time.monotonic()
    # capture_output reads to the end of the output: anything left holding it would keep
    # this call waiting (and make's reader, in a run).
    done = subprocess.run(["bash", "-c", script, "limited", *command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return done, time.monotonic() - started


def test_a_tier_past_its_limit_prints_its_stacks_and_is_ended_whole(tmp_path: Path) -> None:
    (tmp_path / "hangs.py").write_text(HANGS)
    done, took = _limited("3", sys.executable, "hangs.py", cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert took < 30, took
    assert "this tier still runs after 3 s" in out, out
    # The stacks came from the hung process, with its own frame in them.
    assert "in hangs_where_no_watchdog_looks" in out, out


def test_a_tier_in_time_keeps_its_status(tmp_path: Path) -> None:
    done, took = _limited("300", "bash", "-c", "exit 3", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert took < 10, took
    assert done.stdout == "", done.stdout


def test_a_limit_that_is_not_seconds_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done, _ = _limited("'45 min'", "touch", "ran", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "whole seconds" in done.stderr, done.stderr
    assert not (tmp_path / "ran").exists()
