"""The portal's browser tests (Playwright, portal/e2e/) run from pytest: Debian's Chromium,
the built portal, and where the screenshots go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PORTAL = REPO / "portal"
CHROMIUM = os.environ.get("CAIRN_CHROMIUM", "/usr/bin/chromium")


def require_portal() -> None:
    """Fails (not skips) the test when what `make test` installs is missing."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    if not (PORTAL / "node_modules" / "@playwright" / "test").is_dir() or not (
            PORTAL / "dist" / "index.html").is_file():
        pytest.fail("the portal is not built: run `make portal` (make test does)")


def screenshots(tmp_path: Path) -> Path:
    """The README's pictures (docs/portal/) are retaken on purpose, with
    CAIRN_E2E_SCREENSHOTS=docs/portal; a run otherwise leaves the checkout clean."""
    shots = Path(os.environ.get("CAIRN_E2E_SCREENSHOTS", tmp_path))
    shots = shots if shots.is_absolute() else REPO / shots
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def playwright(url: str, tmp_path: Path, values: dict[str, str],
               spec: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs the portal's browser tests (one `spec`, or all) against the portal at `url`,
    with `values` in their environment; the run, whatever its outcome."""
    node_bin = Path(sys.executable).parent
    return subprocess.run(
        [str(node_bin / "npx"), "playwright", "test", *([spec] if spec else [])],
        cwd=PORTAL, text=True, capture_output=True, timeout=900, check=False,
        env={**os.environ, "PATH": f"{node_bin}:{os.environ['PATH']}",
             "CAIRN_PORTAL_URL": url, "CAIRN_CHROMIUM": CHROMIUM,
             "CAIRN_E2E_OUTPUT": str(tmp_path / "results"),
             "CAIRN_E2E_SCREENSHOTS": str(screenshots(tmp_path)), **values})


def output(run: subprocess.CompletedProcess[str]) -> str:
    """What a failed run said, its end (Playwright's report is long)."""
    return run.stdout[-6000:] + run.stderr[-3000:]
