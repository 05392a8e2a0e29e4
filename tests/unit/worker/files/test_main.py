"""`cairn-files` refuses to start without what it needs, saying which setting to set."""

from __future__ import annotations

import pytest

from services.settings import get_settings
from worker.files import main


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
