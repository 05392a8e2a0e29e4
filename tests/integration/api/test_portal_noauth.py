"""The first ten minutes in a real browser (Debian's Chromium, driven by Playwright) on the
stack `make up` starts by default: noauth, no Keystone, no Cinder, the volumes being the RBD
images of ceph-a's pool `volumes` (CAIRN_VOLUME_POOLS). A newcomer signs in with a project
name, finds the demo volume, backs it up, watches the backup, sees its restore point in
the calendar and restores it into a new image (e2e/first-ten-minutes.spec.ts); the restored
bytes are the restore point's. The screenshots are the README's (docs/portal/first-*.png)
when asked (CAIRN_E2E_SCREENSHOTS=docs/portal), else the test's own files.

The test stack's API runs in-process; the browser needs TCP, so a cairn-api process with
the stack's settings serves the portal, beside the stack's worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack, api_process

REPO = Path(__file__).resolve().parents[3]
PORTAL = REPO / "portal"
CHROMIUM = os.environ.get("CAIRN_CHROMIUM", "/usr/bin/chromium")

pytestmark = pytest.mark.ceph


# Chromium and the portal's own timeouts: alone, after the parallel phase.
@pytest.mark.serial
def test_a_newcomer_protects_and_restores_the_demo_volume_in_the_browser(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    if not (PORTAL / "node_modules" / "@playwright" / "test").is_dir() or not (
            PORTAL / "dist" / "index.html").is_file():
        pytest.fail("the portal is not built: run `make portal` (make test does)")
    # `0-`: first in the pool's list, as `demo` is on make up's stack (the Volumes page
    # shows the first 50 of every test's images here).
    volume = ceph.unique_name("0-demo")
    restored = ceph.unique_name("first-ten-restored")
    ceph.make_mixed_image(volumes_pool, volume, size=64 * MiB, seed=3610)
    images.extend([volume, restored])
    shots = Path(os.environ.get("CAIRN_E2E_SCREENSHOTS", tmp_path))
    shots = shots if shots.is_absolute() else REPO / shots
    shots.mkdir(parents=True, exist_ok=True)
    node_bin = Path(sys.executable).parent
    with api_process(stack.env, tmp_path / "api.log") as address:
        run = subprocess.run(
            [str(node_bin / "npx"), "playwright", "test", "e2e/first-ten-minutes.spec.ts"],
            cwd=PORTAL, text=True, capture_output=True, timeout=600, check=False,
            env={**os.environ, "PATH": f"{node_bin}:{os.environ['PATH']}",
                 "CAIRN_PORTAL_URL": f"http://{address}", "CAIRN_CHROMIUM": CHROMIUM,
                 "CAIRN_E2E_NOAUTH_PROJECT": ceph.unique_name("newcomer"),
                 "CAIRN_E2E_NOAUTH_VOLUME": volume, "CAIRN_E2E_NOAUTH_RESTORED": restored,
                 "CAIRN_E2E_OUTPUT": str(tmp_path / "results"),
                 "CAIRN_E2E_SCREENSHOTS": str(shots)})
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout, run.stdout[-3000:]  # not skipped
    # The restore point's source snapshot is the volume as it was; nothing wrote since.
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, volume)
