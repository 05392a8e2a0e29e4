"""The client's address: the TCP peer's, and X-Forwarded-For only as far as proxies the
operator named appended to it."""

from __future__ import annotations

from ipaddress import ip_network
from typing import Any

from api.peers import client_address, client_network

PROXIES = [ip_network("10.0.0.0/24"), ip_network("fd00::/64")]


def _scope(peer: str, *forwarded: str) -> dict[str, Any]:
    return {"client": (peer, 40000),
            "headers": [(b"x-forwarded-for", f.encode()) for f in forwarded]}


def test_without_trusted_proxies_the_header_is_anyones_text() -> None:
    assert client_address(_scope("198.51.100.7", "127.0.0.1"), []) == "198.51.100.7"
    assert client_address(_scope("127.0.0.1", "203.0.113.9"), []) == "127.0.0.1"


def test_a_client_that_is_not_a_trusted_proxy_names_nobody() -> None:
    assert client_address(_scope("198.51.100.7", "203.0.113.9"), PROXIES) == "198.51.100.7"


def test_behind_trusted_proxies_the_nearest_untrusted_hop_is_the_client() -> None:
    # The client wrote "1.2.3.4" itself; the proxy appended what it saw.
    scope = _scope("10.0.0.5", "1.2.3.4, 203.0.113.9")
    assert client_address(scope, PROXIES) == "203.0.113.9"
    two_proxies = _scope("10.0.0.5", "1.2.3.4, 203.0.113.9, 10.0.0.8")
    assert client_address(two_proxies, PROXIES) == "203.0.113.9"
    split = _scope("10.0.0.5", "1.2.3.4", "203.0.113.9")  # two header lines
    assert client_address(split, PROXIES) == "203.0.113.9"
    assert client_address(_scope("fd00::1", "2001:db8::7"), PROXIES) == "2001:db8::7"


def test_a_proxy_that_forwards_nothing_is_the_client() -> None:
    assert client_address(_scope("10.0.0.5"), PROXIES) == "10.0.0.5"
    assert client_address(_scope("10.0.0.5", "10.0.0.7"), PROXIES) == "10.0.0.7"


def test_text_that_is_no_address_ends_the_trust() -> None:
    scope = _scope("10.0.0.5", "203.0.113.9, evil, 10.0.0.8")
    assert client_address(scope, PROXIES) == "10.0.0.8"
    assert client_address(_scope("10.0.0.5", "unknown"), PROXIES) == "10.0.0.5"


def test_an_ipv6_client_is_its_64_for_limits() -> None:
    assert client_network("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64"
    assert client_network("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert client_network("::ffff:198.51.100.7") == "198.51.100.7"
    assert client_network("198.51.100.7") == "198.51.100.7"
    assert client_network("") == ""
