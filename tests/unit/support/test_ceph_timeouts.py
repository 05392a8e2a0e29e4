"""The tests' own Rados clients (tests/support/ceph.py) carry deadlines, so a full or stalled
cluster fails a test's call instead of blocking the run inside librados: shown here on a
monitor that accepts the connection and never answers."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import rados

from tests.support import ceph


@pytest.fixture
def silent_mon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A cluster `silent` whose monitor's port accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    (tmp_path / "silent").mkdir()
    (tmp_path / "silent" / "ceph.conf").write_text(
        f"[global]\nmon host = v2:127.0.0.1:{port}\nauth client required = none\n"
        f"log file = {tmp_path / 'client.log'}\n")
    monkeypatch.setattr(ceph, "STATE", tmp_path)
    yield "silent"
    listener.close()


def test_every_client_of_the_tests_has_deadlines(silent_mon: str) -> None:
    handle = ceph.client(silent_mon)
    try:
        for option in ("rados_osd_op_timeout", "rados_mon_op_timeout"):
            assert handle.conf_get(option) == str(ceph.OP_TIMEOUT_SECONDS), option
        assert handle.conf_get("client_mount_timeout") == "10"
    finally:
        handle.shutdown()


def test_a_monitor_that_never_answers_fails_the_connect_in_time(silent_mon: str) -> None:
    started = time.monotonic()
    with pytest.raises(rados.Error):
        ceph.connect(silent_mon, client_mount_timeout="1")
    assert time.monotonic() - started < 15
