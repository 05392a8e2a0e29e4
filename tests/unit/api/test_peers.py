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


def test_an_ipv6_client_is_its_48_for_limits() -> None:
    # One site is given a /48 (or a /56): counted by /64 it was 65,536 clients.
    assert client_network("2001:db8:1:2:aaaa::1") == "2001:db8:1::/48"
    assert client_network("2001:db8:1:ff:bbbb::9") == "2001:db8:1::/48"
    assert client_network("2001:db8:2::9") == "2001:db8:2::/48"
    assert client_network("198.51.100.7") == "198.51.100.7"
    assert client_network("") == ""


def test_ipv6_forms_that_carry_an_ipv4_address_count_as_that_address() -> None:
    # 6to4 (2002:c633:6407::/48 is 198.51.100.7's) and Teredo (the client's address,
    # inverted, in the last 32 bits): one IPv4 host, however many IPv6 addresses.
    assert client_network("2002:c633:6407:1::5") == "198.51.100.7"
    assert client_network("2002:c633:6407:ffff::9") == "198.51.100.7"
    assert client_network("2001:0:4136:e378:8000:63bf:39cc:9bf8") == "198.51.100.7"


def test_an_ipv4_peer_on_a_dual_stack_socket_is_its_ipv4_address() -> None:
    proxies = [ip_network("10.0.0.0/24")]
    # Before: ::ffff:10.0.0.5 never matched 10.0.0.0/24, so the proxy was every client.
    assert client_address(_scope("::ffff:10.0.0.5", "203.0.113.9"), proxies) == "203.0.113.9"
    assert client_address(_scope("::ffff:198.51.100.7"), []) == "198.51.100.7"
    assert client_network("::ffff:198.51.100.7") == "198.51.100.7"


def test_forwarded_hops_with_ports_or_brackets_are_addresses() -> None:
    assert client_address(_scope("10.0.0.5", "203.0.113.9:5678"), PROXIES) == "203.0.113.9"
    assert client_address(_scope("10.0.0.5", "[2001:db8::7]:443"), PROXIES) == "2001:db8::7"
    assert client_address(_scope("10.0.0.5", "[2001:db8::7]"), PROXIES) == "2001:db8::7"
    # A trusted hop written with its port is passed like any other.
    scope = _scope("10.0.0.5", "203.0.113.9, 10.0.0.8:4431")
    assert client_address(scope, PROXIES) == "203.0.113.9"
    # Anything else still ends the trust.
    for odd in ("[2001:db8::7", "[2001:db8::7]x", "203.0.113.9:", "203.0.113.9:http"):
        assert client_address(_scope("10.0.0.5", odd), PROXIES) == "10.0.0.5", odd
