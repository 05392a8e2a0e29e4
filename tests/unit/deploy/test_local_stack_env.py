"""deploy/local/stack.sh's environment for the Cairn processes: cairn.env (passwords) its
user's alone, and the files token given to cairn-api and cairn-files only. The script's
own functions run in bash over a temporary state directory: nothing is started but `env`."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
STACK = REPO / "deploy" / "local" / "stack.sh"


def _functions() -> str:
    """The script's section of Cairn processes (write_env, files_token, run_cairn)."""
    text = STACK.read_text()
    start = text.rindex("\n", 0, text.index("-" * 16 + " Cairn processes")) + 1
    end = text.index("# changed_settings OLD_CONF NEW_TEXT")
    return text[start:end]


def _run(tmp_path: Path, script: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    prelude = (f'set -euo pipefail\n. "{REPO}/deploy/local/lib.sh"\n'
               f'state="{state}"\nvenv=/nonexistent\nsecond=0 openstack=0 rgw=0\n'
               "PG_PORT=1 REDIS_PORT=2 WORKER_METRICS_PORT=3 SCHEDULER_METRICS_PORT=4 "
               "API_METRICS_PORT=5 FILES_PORT=6\n")
    done = subprocess.run(["bash", "-c", prelude + _functions() + script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=20, check=False,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr


def test_the_env_file_is_its_users_alone_and_holds_no_files_token(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # An env file left by an older stack.sh, readable by all: put right.
    _run(tmp_path, f'touch "{state}/cairn.env"; chmod 644 "{state}/cairn.env"; umask 022\n'
                   "write_env\n")
    env = state / "cairn.env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert "CAIRN_DATABASE_URL=" in env.read_text()
    assert "FILES_TOKEN" not in env.read_text()
    assert stat.S_IMODE((state / "files.token").stat().st_mode) == 0o600


def test_only_the_api_and_the_file_service_get_the_files_token(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _run(tmp_path, "umask 022\nwrite_env\n"
                   "for name in cairn-api cairn-worker cairn-scheduler cairn-files; do\n"
                   '    run_cairn "$name" env\n'
                   "done\nwait\n")
    token = (state / "files.token").read_text().strip()
    for name, given in [("cairn-api", True), ("cairn-files", True),
                        ("cairn-worker", False), ("cairn-scheduler", False)]:
        log = state / "log" / f"{name}.log"
        until = time.monotonic() + 10
        while "CAIRN_DATABASE_URL" not in log.read_text():
            assert time.monotonic() < until, name
            time.sleep(0.05)
        assert (f"CAIRN_FILES_TOKEN={token}" in log.read_text()) is given, name
        conf = state / "run" / f"{name}.conf"
        assert stat.S_IMODE(conf.stat().st_mode) == 0o600
        assert token not in conf.read_text()
