"""`cairn-files` refuses to start without what it needs, saying which setting to set, and
serves with its bounded protocol."""

from __future__ import annotations

from typing import Any

import pytest

from services.settings import get_settings
from worker.files import main
from worker.files.http_protocol import REFUSING, FilesHttpProtocol


@pytest.mark.parametrize(("env", "says"), [
    ({}, "cairn-files: refusing to start: CAIRN_AUTH_STRATEGY is not set"),
    ({"CAIRN_AUTH_STRATEGY": "noauth", "CAIRN_ENVIRONMENT": "development"},
     "cairn-files: refusing to start: CAIRN_FILES_TOKEN is not set"),
    ({"CAIRN_AUTH_STRATEGY": "noauth", "CAIRN_ENVIRONMENT": "development",
      "CAIRN_FILES_TOKEN": "short"}, "CAIRN_FILES_TOKEN must hold at least 32 characters"),
])
def test_it_refuses_to_start_unconfigured(monkeypatch: pytest.MonkeyPatch,
                                          env: dict[str, str], says: str) -> None:
    for name in ("CAIRN_AUTH_STRATEGY", "CAIRN_ENVIRONMENT", "CAIRN_FILES_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as raised:
            main.main()
    finally:
        get_settings.cache_clear()
    assert says in str(raised.value)


def test_it_serves_with_bounded_headers_and_a_connection_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's plain httptools bounds neither a request's headers nor their time, and the
    token is checked only once they are parsed (worker/files/http_protocol.py)."""
    for name, value in {"CAIRN_AUTH_STRATEGY": "noauth", "CAIRN_ENVIRONMENT": "development",
                        "CAIRN_FILES_TOKEN": "t" * 32, "CAIRN_FILES_SESSIONS": "8",
                        "CAIRN_FILES_PER_PROJECT": "2"}.items():
        monkeypatch.setenv(name, value)
    served: dict[str, Any] = {}
    monkeypatch.setattr(main, "build", lambda settings: None)
    monkeypatch.setattr(main, "create_app", lambda service, token: "the app")
    monkeypatch.setattr(main.uvicorn, "run", lambda app, **options: served.update(options))
    monkeypatch.setattr(main.faulthandler, "register", lambda *args, **kwargs: None)
    monkeypatch.setattr(main.faulthandler, "enable", lambda *args, **kwargs: None)
    get_settings.cache_clear()
    try:
        main.main()
    finally:
        get_settings.cache_clear()
    assert served["http"] is FilesHttpProtocol
    assert served["limit_concurrency"] == 8 * 2 + REFUSING
