"""deploy/local/ceph_client_asserts.sh: at the end of `make test`, a Ceph client's failed
assertion from this run is printed from the clients' log (the terminal only said
"Aborted"), one from an earlier run is not, and a run with none, or with no log at all
(a clean clone), prints nothing and goes on under test.sh's `set -euo pipefail`."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = REPO / "deploy" / "local"

ASSERTION = ("/build/ceph/src/librbd/ImageCtx.cc: 123: FAILED ceph_assert(snap_id != 0)\n"
             " ceph version 16.2.15\n")


def _run(state: Path, between: str = "") -> subprocess.CompletedProcess[str]:
    """Mark the logs, run `between` (the run), then look, as test.sh does."""
    script = (f'set -euo pipefail; . "{SCRIPTS}/lib.sh"; . "{SCRIPTS}/ceph_client_asserts.sh"; '
              f'ceph_client_logs_mark "{state}" "{state}/mark"; {between}'
              f'ceph_client_asserts "{state}" "{state}/mark"; echo "went on"')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                          check=False)


def _client_log(state: Path) -> Path:
    log = state / "ceph-a" / "log" / "client.admin.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return log


def test_no_client_log_at_all_goes_on_quietly(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "went on\n", done.stdout + done.stderr


def test_an_assertion_during_the_run_is_printed(tmp_path: Path) -> None:
    log = _client_log(tmp_path)
    log.write_text("an earlier line\n")
    done = _run(tmp_path, f"printf '%s' '{ASSERTION}' >> '{log}'; ")
    assert done.returncode == 0, done.stderr
    assert "a Ceph client failed an assertion" in done.stdout, done.stdout
    assert "FAILED ceph_assert(snap_id != 0)" in done.stdout, done.stdout
    assert done.stdout.endswith("went on\n"), done.stdout


def test_a_log_the_run_made_is_read_from_its_start(tmp_path: Path) -> None:
    # A clean clone: no log when the run began, the clusters it started wrote one.
    log = tmp_path / "ceph-b" / "log" / "client.admin.log"
    done = _run(tmp_path, f"mkdir -p '{log.parent}'; printf '%s' '{ASSERTION}' > '{log}'; ")
    assert done.returncode == 0, done.stderr
    assert "FAILED ceph_assert" in done.stdout, done.stdout + done.stderr
    assert done.stdout.endswith("went on\n"), done.stdout


def test_a_log_made_anew_during_the_run_is_read_whole(tmp_path: Path) -> None:
    log = _client_log(tmp_path)
    log.write_text("an earlier run's long log\n" * 100)
    done = _run(tmp_path, f"printf '%s' '{ASSERTION}' > '{log}'; ")
    assert "FAILED ceph_assert" in done.stdout, done.stdout + done.stderr


def test_an_earlier_runs_assertion_is_not_this_runs(tmp_path: Path) -> None:
    log = _client_log(tmp_path)
    log.write_text(ASSERTION + "later, quiet lines\n")
    done = _run(tmp_path, f"echo 'this run: fine' >> '{log}'; ")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "went on\n", done.stdout
