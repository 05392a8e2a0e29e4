"""noauth believes whoever reaches it: cairn-api under noauth listens on loopback only,
unless the operator says otherwise."""

from __future__ import annotations

import pytest

from api.main import refuse_open_noauth
from services.settings import Settings

NOAUTH = Settings(auth_strategy="noauth", environment="development")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "10.1.2.3", "192.168.0.1",
                                  "cairn.example.org", "", "127.0.0.1.example.org"])
def test_noauth_refuses_other_addresses(host: str) -> None:
    with pytest.raises(SystemExit, match=r"noauth believes whoever reaches it.*Listen on "
                                         r"127\.0\.0\.1, use keystone, or set "
                                         r"CAIRN_NOAUTH_ALLOW_REMOTE=true"):
        refuse_open_noauth(NOAUTH, host)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_noauth_listens_on_loopback(host: str) -> None:
    refuse_open_noauth(NOAUTH, host)


def test_keystone_or_an_explicit_permission_listen_anywhere() -> None:
    refuse_open_noauth(NOAUTH.model_copy(update={"noauth_allow_remote": True}), "0.0.0.0")
    keystone = Settings(auth_strategy="keystone",
                        keystone={"auth_url": "http://k/v3", "username": "u",  # type: ignore[arg-type]
                                  "password": "p"})
    refuse_open_noauth(keystone, "0.0.0.0")
