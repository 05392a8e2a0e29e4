from __future__ import annotations

import pytest

from cairnclient.http import Http
from tests.unit.cli.standin import FakeSession


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> FakeSession:
    """Every `cairn` command of the test talks to this stand-in."""
    fake = FakeSession({})
    http = Http(fake, "http://cairn.test", {}, {})  # type: ignore[arg-type]
    monkeypatch.setattr(Http, "connect", classmethod(lambda cls, cloud, endpoint: http))
    return fake
