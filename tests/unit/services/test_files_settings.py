"""The file service's settings (cairn-files, issue 34): what an operator can get wrong is
refused at start, saying which setting to fix."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from services.settings import Settings


def _settings(**files: Any) -> Settings:
    return Settings(auth_strategy="noauth", environment="development", **files)


def test_the_defaults_are_a_working_file_service() -> None:
    settings = _settings()
    assert settings.files_bind_address == ("127.0.0.1", 8790)
    assert settings.files_per_project < settings.files_sessions
    assert settings.files_token is None  # cairn-files itself refuses to start without


@pytest.mark.parametrize(("files", "says"), [
    ({"files_token": "short"}, "at least 32 characters"),
    ({"files_per_project": 16}, "CAIRN_FILES_PER_PROJECT (16) must be below"),
    ({"files_version_threads": 17}, "CAIRN_FILES_VERSION_THREADS (17) must be at most"),
    ({"files_bind": "127.0.0.1:99999"}, "the port must be 1-65535"),
    ({"files_bind": "127.0.0.1"}, "files_bind"),
    ({"files_url": "http://user:secret@files:8790"}, "files_url"),
    ({"files_sessions": 0}, "files_sessions"),
])
def test_a_file_service_that_cannot_work_is_refused(files: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _settings(**files)
    assert says in str(raised.value)


def test_the_token_is_a_secret_and_ipv6_binds() -> None:
    settings = _settings(files_token="x" * 64, files_bind="[::1]:31880", files_sessions=1,
                         files_per_project=1, files_version_threads=1)
    assert "x" * 64 not in repr(settings)
    assert settings.files_bind_address == ("::1", 31880)
