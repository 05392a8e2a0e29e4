"""Webhook signatures match the Standard Webhooks reference vector (so any receiver library
accepts them), rotation keeps the old secret signing for its overlap only, and URLs that
resolve to private, loopback, link-local or metadata addresses are refused unless allowed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Network

import pytest

from services.errors import InvalidInput
from services.webhooks import secrets, signing
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
    "http://192.168.1.1/", "http://224.0.0.1/"])
def test_special_addresses_are_refused(url: str) -> None:
    with pytest.raises(InvalidInput, match="CAIRN_WEBHOOK_ALLOWED_NETWORKS"):
        check_url(url, [])


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://8.8.8.8/", "http"), ("http:///nohost", "http"),
    ("https://u:p@8.8.8.8/", "credentials"), ("http://no-such-host.invalid/", "does not resolve")])
def test_malformed_urls_are_refused(url: str, why: str) -> None:
    with pytest.raises(InvalidInput, match=why):
        check_url(url, [])


def test_public_and_allowed_addresses_pass() -> None:
    check_url("https://8.8.8.8/hooks/cairn", [])
    check_url("http://127.0.0.1:9000/hook", [IPv4Network("127.0.0.0/8")])
    with pytest.raises(InvalidInput):  # the allowlist admits only what it names
        check_url("http://10.0.0.1/hook", [IPv4Network("127.0.0.0/8")])
