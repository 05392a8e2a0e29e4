"""noauth believes whoever reaches it, so it answers this host's clients only, however the
API was started: here as an operator might by hand, `uvicorn api.main:create_app --factory
--host 0.0.0.0`, which never passes `cairn-api`'s check of --host. Before, such a process
served any network client as whoever its headers said (`X-Roles: admin` with the admin
project: the cloud's administrator)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.redis_server import free_port
from tests.support.stack import BIN, CLOUD_ADMIN, HEADERS, Process, Stack

# Whom the API answers does not depend on the database.
pytestmark = pytest.mark.production_database_only


def _this_hosts_other_address() -> str:
    """An address of this host that is not loopback (the one it would reach the network
    from); the test cannot run on a host without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: only a route is chosen
        except OSError:
            pytest.skip("this host has no network address besides loopback")
        address: str = probe.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("this host has no network address besides loopback")
    return address


@pytest.fixture
def open_uvicorn(stack: Stack, tmp_path: Path) -> Iterator[int]:
    port = free_port()
    process = Process("uvicorn", [str(BIN / "uvicorn"), "api.main:create_app", "--factory",
                                  "--host", "0.0.0.0", "--port", str(port)],
                      stack.env, tmp_path / "uvicorn.log")
    process.start("Uvicorn running")
    try:
        yield port
    finally:
        process.stop()


def test_noauth_answers_clients_of_this_host_only(open_uvicorn: int) -> None:
    port = open_uvicorn
    remote = f"http://{_this_hosts_other_address()}:{port}"
    for path, headers in (("/healthz", {}), ("/v1/plans", HEADERS),
                          ("/v1/orphans", CLOUD_ADMIN)):
        refused = httpx.get(remote + path, headers=headers, timeout=30)
        assert refused.status_code == 403, (path, refused.text)
        error = refused.json()["error"]
        assert error["code"] == "forbidden"
        assert "answers clients on its own host (loopback) only" in error["message"]
        assert "CAIRN_NOAUTH_ALLOW_REMOTE=true" in error["message"]
    local = httpx.get(f"http://127.0.0.1:{port}/v1/plans", headers=HEADERS, timeout=30)
    assert local.status_code == 200, local.text
