"""The plugin's tests run `openstack` in Debian's system Python (tests/tools/osc/osc_run.py):
python-openstackclient, osc-lib and cliff are Debian's packages there, and none is in the
project's virtualenv. Every case of a test module runs in one child, so the tier pays for
osc's import once per module (about a second), not once per command."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SYSTEM_PYTHON = "/usr/bin/python3"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CAIRN = "http://cairn.test"


def osc_available() -> bool:
    done = subprocess.run([SYSTEM_PYTHON, "-c", "import openstackclient.shell, osc_lib, cliff"],
                          capture_output=True, check=False)
    return done.returncode == 0


needs_osc = pytest.mark.skipif(
    not Path(SYSTEM_PYTHON).exists() or not osc_available(),
    reason="Debian's python3-openstackclient is not installed (make test installs it)")


@dataclass
class Case:
    argv: list[str]
    routes: dict[str, tuple[int, Any]] = field(default_factory=dict)
    endpoint: bool = True
    """Cairn's URL given as osc's endpoint override (else the catalog's would be asked)."""


@dataclass
class Ran:
    code: int
    out: str
    err: str
    sent: list[dict[str, Any]]

    def json(self) -> Any:
        assert self.code == 0, self.err
        return json.loads(self.out)


@dataclass
class Session:
    commands: list[str]
    """The plugin's commands as osc registered them."""
    ran: dict[str, Ran]


def run_all(cases: dict[str, Case], tmp: Path) -> Session:
    """`openstack ARGV` for each case, in one child; `cairnclient` on its path from a
    directory holding only it (the checkout's egg-info would add its entry points)."""
    (tmp / "cairnclient").symlink_to(REPO / "cairnclient")
    payload = [{"argv": (["--os-volume-backup-endpoint-override", CAIRN] if case.endpoint
                         else []) + case.argv, "routes": case.routes}
               for case in cases.values()]
    done = subprocess.run([SYSTEM_PYTHON, str(HERE / "osc_run.py")], input=json.dumps(payload),
                          env={"PYTHONPATH": str(tmp), "HOME": str(tmp), "PATH": "/usr/bin:/bin"},
                          cwd=tmp, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    return Session(answer["commands"], {name: Ran(**ran) for name, ran in
                                        zip(cases, answer["answers"], strict=True)})
