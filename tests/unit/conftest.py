"""The unit tier: pure logic, no server. `make test-unit` runs it with nothing started.

A unit test that reaches for a server (Ceph, Redis, PostgreSQL, Keystone) fails at once
here instead of passing only on a machine where the stack happens to run."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.base import Base
from services.db import Database


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


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A SQLite file with the models' schema (a file, not a server: the unit tier's own)."""
    database = Database(f"sqlite:///{tmp_path / 'cairn.db'}")
    Base.metadata.create_all(database.engine)
    yield database
    database.dispose()
