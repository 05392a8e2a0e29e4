"""The portal's session cookie: what the browser holds opens only under the deployment's
key, unchanged and unexpired; anything else is no session at all."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.auth.portal_sessions import PortalSession, SessionSeal, new_csrf, read_keys
from services.errors import StorageUnavailable

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _session(**changes: object) -> PortalSession:
    base = {"csrf": new_csrf(), "expires_at": NOW + timedelta(hours=1),
            "project_id": "p1", "user_name": "alice", "token": "tok-scoped",
            "unscoped": "tok-unscoped", "roles": ()}
    base.update(changes)
    return PortalSession(**base)  # type: ignore[arg-type]


def test_a_sealed_session_opens_as_it_was_and_hides_its_tokens() -> None:
    seal = SessionSeal(secrets.token_bytes(32))
    session = _session()
    value = seal.seal(session)
    assert "tok-scoped" not in value
    assert "alice" not in value
    assert seal.open(value, NOW) == session
    assert "tok-scoped" not in repr(session)


def test_a_changed_foreign_or_expired_cookie_is_no_session() -> None:
    seal = SessionSeal(secrets.token_bytes(32))
    value = seal.seal(_session())
    flipped = value[:20] + ("A" if value[20] != "A" else "B") + value[21:]
    assert seal.open(flipped, NOW) is None
    assert seal.open(value[:-4], NOW) is None
    assert seal.open("not a cookie at all!", NOW) is None
    assert seal.open("", NOW) is None
    assert SessionSeal(secrets.token_bytes(32)).open(value, NOW) is None
    assert seal.open(value, NOW + timedelta(hours=1)) is None


def test_the_csrf_token_must_match_exactly() -> None:
    session = _session(csrf="abc")
    assert session.csrf_matches("abc")
    assert not session.csrf_matches("abd")
    assert not session.csrf_matches("")
    assert not session.csrf_matches(None)


def test_a_rotated_key_still_opens_what_the_previous_one_sealed() -> None:
    old, new = secrets.token_bytes(32), secrets.token_bytes(32)
    before = SessionSeal(old).seal(_session())
    rotated = SessionSeal(new, old)
    assert rotated.open(before, NOW) is not None
    after = rotated.seal(_session())
    assert SessionSeal(new).open(after, NOW) is not None  # sealed under the new key
    assert SessionSeal(old).open(after, NOW) is None
    assert SessionSeal(new).open(before, NOW) is None  # the old key removed: gone


def test_the_key_file_holds_the_current_key_first(tmp_path: Path) -> None:
    old, new = secrets.token_bytes(32), secrets.token_bytes(32)
    path = tmp_path / "portal.key"
    path.write_text(f"# current\n{new.hex()}\n\n{old.hex()}\n")
    assert read_keys(path) == [new, old]
    path.write_text(f"{new.hex()}\n{old.hex()[:-2]}\n")
    with pytest.raises(StorageUnavailable, match="line 2 must hold 64 hex digits"):
        read_keys(path)
    path.write_text("\n# nothing\n")
    with pytest.raises(StorageUnavailable, match="holds no key"):
        read_keys(path)


def test_signed_out_records_name_sessions_without_their_csrf_token() -> None:
    session = _session(csrf="abc")
    assert session.id != _session().id
    assert "abc" not in session.id
    assert len(session.id) == 64
