"""Every module of Cairn imports on its own, whatever was imported before it: an import
cycle among our modules that works from one side only fails here, naming the module that
cannot be entered first (tests/support/import_alone.py says how it stays fast)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.import_alone import modules_of
from tests.support.stack import REPO

PACKAGES = ["api", "services", "worker", "cli", "cairnclient", "manage"]


def _import_alone(root: Path, packages: list[str]) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("CAIRN_")}
    # worker.celery_app configures its Celery app from the settings when it is imported.
    env |= {"CAIRN_AUTH_STRATEGY": "noauth", "CAIRN_ENVIRONMENT": "development",
            "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "tests.support.import_alone", "--root", str(root), *packages],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_every_module_imports_first() -> None:
    assert {"api.main", "services.restore_points.service", "worker.celery_app", "cli.main",
            "manage.main"} <= set(modules_of(REPO, PACKAGES))  # the walk finds them all
    run = _import_alone(REPO, PACKAGES)
    assert run.returncode == 0, f"modules that fail when imported first:\n{run.stdout}{run.stderr}"


def test_a_cycle_that_works_from_one_side_fails_from_the_other(tmp_path: Path) -> None:
    package = tmp_path / "looped"
    package.mkdir()
    (package / "__init__.py").write_text("")
    # Entered from alpha, beta finds alpha half-made and needs nothing of it yet: fine.
    # Entered from beta, alpha asks half-made beta for B, not yet defined: ImportError.
    (package / "alpha.py").write_text("from looped.beta import B\nA = 1\n")
    (package / "beta.py").write_text("import looped.alpha\nB = 2\n")
    (package / "above.py").write_text("import looped.beta\n")
    (package / "leaf.py").write_text("LEAF = 1\n")
    (package / "on_leaf.py").write_text("from looped.leaf import LEAF\n")
    (package / "broken.py").write_text("import looped.leaf\nimport looped_nowhere\n")

    run = _import_alone(tmp_path, ["looped"])

    assert run.returncode == 1
    failed = dict(line.split(": ", 1) for line in run.stdout.splitlines())
    assert set(failed) == {"looped.beta", "looped.above", "looped.broken"}
    assert failed["looped.beta"].startswith("ImportError: cannot import name 'B' from "
                                            "partially initialized module 'looped.beta'")
    assert failed["looped.beta"].endswith("(at looped/alpha.py:1)")
    assert failed["looped.broken"] == ("ModuleNotFoundError: No module named 'looped_nowhere' "
                                       "(at looped/broken.py:2)")
