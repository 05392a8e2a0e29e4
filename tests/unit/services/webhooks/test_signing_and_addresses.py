"""Webhook signatures match the Standard Webhooks reference vector (so any receiver library
accepts them), rotation keeps the old secret signing for its overlap only, and URLs that
resolve to private, loopback, link-local or metadata addresses are refused unless allowed."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Network, ip_address
from typing import Any

import pytest

from services.errors import InvalidInput, ServiceUnavailable
from services.webhooks import addresses, secrets, signing
from services.webhooks.addresses import check_url

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_the_standard_webhooks_reference_vector() -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert signing.sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == expected
    header = signing.headers([signing.new_secret(), secret], "msg_p5jXN8AQM9LWM0D4loKWxJek",
                             1614265330, body)["webhook-signature"]
    assert signing.verify(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body, header)
    assert not signing.verify(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                              body + b" ", header)


def test_a_rotated_secret_signs_alongside_the_old_one_for_the_overlap_only() -> None:
    stored, old = secrets.first()
    assert secrets.active_secrets(stored, NOW) == [old]
    rotated, new = secrets.rotate(stored, NOW, timedelta(hours=24))
    assert new != old
    assert secrets.active_secrets(rotated, NOW + timedelta(hours=23)) == [new, old]
    assert secrets.active_secrets(rotated, NOW + timedelta(hours=25)) == [new]
    again, newest = secrets.rotate(rotated, NOW + timedelta(hours=30), timedelta(hours=24))
    assert [item["secret"] for item in json.loads(again)] == [newest, new]  # expired: dropped


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/hook", "http://localhost/hook", "https://10.1.2.3/",
    "http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://[fe80::1]/",
    "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://100.64.0.1/",
    "http://192.168.1.1/", "http://224.0.0.1/",
    # Loopback spelled as the C library still reads it: resolved, then checked.
    "http://2130706433/", "http://0x7f000001/", "http://127.1/", "http://0177.0.0.1/"])
def test_special_addresses_are_refused(url: str) -> None:
    with pytest.raises(InvalidInput, match="CAIRN_WEBHOOK_ALLOWED_NETWORKS"):
        check_url(url, [])


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://8.8.8.8/", "http"), ("http:///nohost", "http"),
    ("https://u:p@8.8.8.8/", "credentials"), ("https://u@8.8.8.8/", "credentials"),
    ("http://8.8.8.8:99999/", "port"), ("http://8.8.8.8:0/", "port"),
    ("https://8.8.8.8:0/", "port"), ("http://8.8.8.8/a b", "ASCII"),
    ("http://8.8.8.8/\u00e9", "ASCII")])
def test_malformed_urls_are_refused(url: str, why: str) -> None:
    with pytest.raises(InvalidInput, match=why):
        check_url(url, [])


@pytest.mark.parametrize("address", [
    # IPv4's special blocks beyond RFC 1918 and loopback.
    "0.1.2.3", "192.0.0.8", "192.0.2.1", "192.88.99.1", "198.18.0.1", "198.51.100.7",
    "203.0.113.9", "240.0.0.1", "255.255.255.255", "100.100.100.200",
    # IPv6 forms that carry an internal IPv4 address to a translator or tunnel.
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:5",  # NAT64 (well-known)
    "::ffff:7f00:1", "::ffff:a9fe:a9fe",  # IPv4-mapped
    "::ffff:0:7f00:1", "::ffff:0:a00:1",  # IPv4-translated (SIIT)
    "::7f00:1", "::a9fe:a9fe", "::a00:1",  # IPv4-compatible (sit0)
    "2002:7f00:1::1", "2002:a9fe:a9fe::1", "2002:a00:1::",  # 6to4
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo whose client is 127.0.0.1
    "2001:0:7f00:1:8000:63bf:f7f7:f7f7",  # Teredo through a loopback server
    # Non-global IPv6 without an IPv4 address in it.
    "64:ff9b:1::808:808", "64:ff9b:1:ffff::1",  # local-use NAT64: the operator's own
    "fec0::1", "feff::1",  # site-local
    "fc00::1", "fd12:3456::1", "fe80::1", "ff02::1", "ff0e::1", "::", "::1", "100::1",
    "2001:db8::1", "2001:10::1", "2001:2::1", "3fff::1", "5f00::1", "4000::1", "8000::1",
])
def test_special_and_embedded_internal_addresses_are_refused(address: str) -> None:
    assert addresses.refused(ip_address(address), [])


@pytest.mark.parametrize("address", [
    "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:80e::200e",
    "64:ff9b::808:808", "::ffff:808:808", "2002:808:808::1",
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo to 8.8.8.8 through 65.54.227.120
])
def test_global_addresses_and_forms_carrying_them_pass(address: str) -> None:
    assert not addresses.refused(ip_address(address), [])


def test_the_allowlist_admits_a_carried_address_it_names() -> None:
    allowed = [IPv4Network("127.0.0.0/8")]
    assert not addresses.refused(ip_address("::ffff:127.0.0.1"), allowed)
    assert not addresses.refused(ip_address("127.0.0.1"), allowed)
    assert addresses.refused(ip_address("::1"), allowed)
    assert addresses.refused(ip_address("fe80::1%1"), [])


def test_a_refusal_names_neither_the_resolved_address_nor_whether_it_resolved(
        monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {"internal.example": ["10.20.30.40"], "mixed.example": ["8.8.8.8", "127.0.0.1"]}

    def getaddrinfo(host: str, port: int, *args: object, **kwargs: object) -> list[Any]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    messages = []
    for host in ("internal.example", "mixed.example", "nowhere.example"):
        with pytest.raises(InvalidInput) as refusal:
            check_url(f"https://{host}/hook", [])
        messages.append(refusal.value.message.replace(host, "HOST"))
    assert len(set(messages)) == 1, messages  # one answer, whatever the resolver said
    assert "10.20.30.40" not in messages[0]
    assert "127.0.0.1" not in messages[0]


def test_public_and_allowed_addresses_pass() -> None:
    check_url("https://8.8.8.8/hooks/cairn", [])
    check_url("http://127.0.0.1:9000/hook", [IPv4Network("127.0.0.0/8")])
    with pytest.raises(InvalidInput):  # the allowlist admits only what it names
        check_url("http://10.0.0.1/hook", [IPv4Network("127.0.0.0/8")])


def test_refused_networks_win_over_public_and_allowed_ones() -> None:
    """The cloud's own public addresses (Keystone's, RGW's, Cairn's) are the operator's to
    refuse, in every form that carries them."""
    vips = [IPv4Network("8.8.4.0/24")]
    allowed = [IPv4Network("8.8.4.0/24")]
    for address in ("8.8.4.4", "::ffff:8.8.4.4", "64:ff9b::808:404", "2002:808:404::1"):
        assert addresses.refused(ip_address(address), [], vips), address
        assert addresses.refused(ip_address(address), allowed, vips), address
    assert not addresses.refused(ip_address("8.8.8.8"), [], vips)
    with pytest.raises(InvalidInput, match="does not resolve to a public address"):
        check_url("https://8.8.4.4/hook", [], refused_networks=vips)


@pytest.mark.parametrize(("url", "shown"), [
    ("https://eo1a2b3c.m.pipedream.net/path?token=x", "https://*.pipedream.net"),
    ("https://hooks.slack.com/services/T0/B0/secret", "https://*.slack.com"),
    ("https://example.com:8443/x", "https://example.com:8443"),
    ("http://8.8.8.8/x?token=y", "http://8.8.8.8"),
    ("https://[2606:4700::1111]:444/", "https://[2606:4700::1111]:444"),
    ("http://localhost:80/", "http://localhost")])
def test_everyone_sees_a_webhooks_host_without_what_may_be_secret(url: str,
                                                                  shown: str) -> None:
    assert addresses.shown_host(url) == shown


def test_lookups_beyond_the_cap_fail_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that never answers keeps its lookup's thread past every deadline; no more
    than LOOKUPS such threads exist at once."""
    release = threading.Event()

    def getaddrinfo(host: str, port: int, *args: object, **kwargs: object) -> list[Any]:
        release.wait(10)
        raise socket.gaierror(socket.EAI_AGAIN, "no answer")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(addresses, "LOOKUPS", 3)
    monkeypatch.setattr(addresses, "_lookups", threading.BoundedSemaphore(3))
    try:
        for _ in range(3):
            with pytest.raises(TimeoutError):
                addresses.resolve("slow.example", 443, 0.05)
        started = time.monotonic()
        with pytest.raises(addresses.ResolverBusy):
            addresses.resolve("slow.example", 443, 5)
        assert time.monotonic() - started < 0.5
        with pytest.raises(ServiceUnavailable, match="try again"):
            check_url("https://slow.example/hook", [])
    finally:
        release.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(
            thread.name == "webhook-resolve" for thread in threading.enumerate()):
        time.sleep(0.01)
    with pytest.raises(InvalidInput):  # the slots came back: looked up, and refused
        check_url("https://slow.example/hook", [], timeout=1)
