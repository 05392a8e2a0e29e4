"""noauth believes whoever reaches it: cairn-api under noauth listens on loopback only, and
answers loopback peers only however it was started, unless the operator says otherwise."""

from __future__ import annotations

import pytest

from api.main import refuse_open_noauth
from api.noauth_peers import local_peer
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


@pytest.mark.parametrize(("client", "local"), [
    (("127.0.0.1", 5000), True), (("127.9.9.9", 1), True), (("::1", 1), True),
    (("::ffff:127.0.0.1", 1), True), (None, True), (("testclient", 50000), True),
    (("192.0.2.2", 5000), False), (("10.0.0.1", 1), False), (("::ffff:10.0.0.1", 1), False),
    (("fd00::2", 1), False), (("0.0.0.0", 1), False),
])
def test_a_request_is_local_when_its_peer_is_loopback_or_no_network_peer(
        client: tuple[str, int] | None, local: bool) -> None:
    assert local_peer(client) is local
