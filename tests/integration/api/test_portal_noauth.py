"""The portal in a real browser (Debian's Chromium, driven by Playwright) on the stack
`make up` starts by default: noauth, no Keystone, no Cinder, the volumes being the RBD
images of ceph-a's pool `volumes` (CAIRN_VOLUME_POOLS).

- What the API offers beyond a newcomer's first ten minutes (e2e/parity.spec.ts): webhooks,
  an off-site copy, an instant restore, a plan's copy policy, a group restore; checked here
  afterwards. The first ten minutes themselves run on a literal `make up`
  (tests/system/test_make_up.py).

The screenshots are the README's (docs/portal/) when asked
(CAIRN_E2E_SCREENSHOTS=docs/portal), else the test's own files.

The test stack's API runs in-process; the browser needs TCP, so a cairn-api process with
the stack's settings serves the portal, beside the stack's worker."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import rados

from tests.integration.api.test_plans import create, ref, run_now
from tests.support import browser, ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack, api_process

pytestmark = pytest.mark.ceph


# Chromium and the portal's own timeouts: alone, after the parallel phase.
@pytest.mark.serial
def test_webhooks_copies_instant_and_group_restores_in_the_browser(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], tmp_path: Path) -> None:
    browser.require_portal()
    project = {"X-Project-Id": ceph.unique_name("parity"), "X-Roles": "member"}
    single, first, second = (ceph.unique_name(f"parity-{n}") for n in ("one", "g1", "g2"))
    for seed, name in enumerate((single, first, second)):
        ceph.make_mixed_image(volumes_pool, name, size=16 * MiB, seed=3620 + seed)
        images.append(name)
    instant = ceph.unique_name("parity-instant")
    prefix = f"{ceph.unique_name('grp')}-"
    images.extend([instant, f"{prefix}{first}", f"{prefix}{second}"])
    started = stack.post("/v1/backups", {"volume": ref(single), "target": "local"}, project)
    assert started.status_code == 202, started.text
    backup = stack.wait_job(started.json()["id"], headers=project)
    assert backup["status"] == "succeeded", backup
    plan = create(stack, {"name": ceph.unique_name("parity-plan"), "consistency": "group",
                          "volumes": [ref(first), ref(second)],
                          "rules": [{"kind": "incremental", "cron": "0 2 * * *"}]}, project)
    run_now(stack, plan["id"], project)

    with _receiver() as (url, received):
        run = _playwright(stack, "e2e/parity.spec.ts", tmp_path, {
            "CAIRN_E2E_PARITY_PROJECT": project["X-Project-Id"],
            "CAIRN_E2E_PARITY_VOLUME": ref(single), "CAIRN_E2E_GROUP_VOLUME": ref(first),
            "CAIRN_E2E_PARITY_PLAN": plan["name"], "CAIRN_E2E_COPY_TARGET": "dir",
            "CAIRN_E2E_INSTANT_IMAGE": instant, "CAIRN_E2E_GROUP_PREFIX": prefix,
            "CAIRN_E2E_WEBHOOK_URL": url})
    try:
        assert "4 passed" in run, run[-3000:]
        assert received, "the webhook's test delivery never arrived"
        # The copy: a restore point of its own on `dir`, made from the backup's.
        points = stack.get("/v1/restore-points", project,
                           volume=ref(single)).json()["restore_points"]
        assert {(p["target"], p["copied_from_restore_point_id"]) for p in points} == {
            ("local", None), ("dir", backup["restore_point_id"])}
        # The instant restore and the group's: the volumes' bytes (not written since).
        for restored, source in ((instant, single), (f"{prefix}{first}", first),
                                 (f"{prefix}{second}", second)):
            assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool,
                                                                             source)
        saved = stack.get(f"/v1/plans/{plan['id']}", project).json()
        assert (saved["offsite"]["target"], saved["offsite"]["every"]) == ("dir", "day")
        assert stack.get("/v1/webhooks", project).json()["webhooks"] == []
    finally:
        stack.delete(f"/v1/plans/{plan['id']}", project)


def _playwright(stack: Stack, spec: str, tmp_path: Path, values: dict[str, str]) -> str:
    """Runs one spec against a cairn-api process of the stack's settings; its output."""
    with api_process(stack.env, tmp_path / f"api-{Path(spec).stem}.log") as address:
        run = browser.playwright(f"http://{address}", tmp_path, values, spec)
    assert run.returncode == 0, browser.output(run)
    return run.stdout


@contextmanager
def _receiver() -> Iterator[tuple[str, list[bytes]]]:
    """A webhook receiver on loopback answering 204 to every POST; yields its URL and the
    bodies it received."""
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/cairn", received
    finally:
        server.shutdown()
        server.server_close()
