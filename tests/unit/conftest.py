"""The unit tier: pure logic, no server. `make test-unit` runs it with nothing started.

A unit test that reaches for a server (Ceph, Redis, PostgreSQL, Keystone) fails at once
here instead of passing only on a machine where the stack happens to run."""

from __future__ import annotations

import socket
from typing import Any

import pytest


class ServerNeeded(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise ServerNeeded(f"a unit test connected to {address}; a test that needs a "
                               "server belongs in tests/integration/")
        real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
