"""Cairn's SigV4 signer signs what boto3 signs: AWS's published example, and the very
requests a boto3 client of the same settings makes (caught before they are sent), for
several methods, keys with odd characters, query strings, empty and non-empty bodies."""

from __future__ import annotations

import calendar
import contextlib
import re
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config

from services.storage.sigv4 import Signer, canonical_query, quote_path

ACCESS, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
KEYS = ["plain", "a b+c=d&e", "ümlaut/ß/東京", "tilde~star*quote'", "dots/../and//slashes",
        "percent%20not-decoded", "semi;colon,comma:colon@at$dollar!bang(paren)"]


def test_aws_published_example_get_object() -> None:
    """docs.aws.amazon.com, "Signature calculations for the Authorization header",
    example GET Object (range header, empty payload's hash)."""
    signed = Signer("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                    "us-east-1").headers(
        "GET", "examplebucket.s3.amazonaws.com", "/test.txt", extra={"range": "bytes=0-9"},
        payload="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        now=calendar.timegm((2013, 5, 24, 0, 0, 0)))
    assert signed["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")


def _boto3_requests(endpoint: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """What a boto3 client configured as Cairn's makes for `calls`, signed, unsent."""
    client = boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="eu-west-3", aws_access_key_id=ACCESS,
        aws_secret_access_key=SECRET,
        config=Config(s3={"addressing_style": "path", "payload_signing_enabled": False},
                      request_checksum_calculation="when_required",
                      response_checksum_validation="when_required",
                      retries={"total_max_attempts": 1}))
    caught: list[Any] = []

    def catch(request: Any, **_kwargs: Any) -> AWSResponse:
        caught.append(request)
        return AWSResponse(request.url, 200, {}, None)

    client.meta.events.register("before-send.s3", catch)
    for operation, params in calls:
        with contextlib.suppress(Exception):  # the empty answer is not every operation's
            getattr(client, operation)(**params)
    return caught


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:8480", "https://s3.example.net"])
def test_the_signature_is_botocores_for_the_same_request(endpoint: str) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    for key in KEYS:
        calls += [("put_object", {"Bucket": "bk", "Key": key, "Body": b"sealed"}),
                  ("put_object", {"Bucket": "bk", "Key": key, "Body": b""}),
                  ("put_object", {"Bucket": "bk", "Key": key, "Body": b"x",
                                  "IfNoneMatch": "*"}),
                  ("get_object", {"Bucket": "bk", "Key": key}),
                  ("head_object", {"Bucket": "bk", "Key": key}),
                  ("delete_object", {"Bucket": "bk", "Key": key}),
                  ("list_objects_v2", {"Bucket": "bk", "Prefix": key, "MaxKeys": 1,
                                       "StartAfter": "a=b&c d"})]
    requests = _boto3_requests(endpoint, calls)
    assert len(requests) == len(calls)
    signer = Signer(ACCESS, SECRET, "eu-west-3")
    for (operation, params), request in zip(calls, requests, strict=True):
        url = urlsplit(request.url)
        headers = {name.lower(): value.decode() if isinstance(value, bytes) else value
                   for name, value in request.headers.items()}
        names = re.search(r"SignedHeaders=([^,]+)", headers["authorization"])
        assert names is not None
        extra = {name: headers[name] for name in names.group(1).split(";")
                 if name not in ("host", "x-amz-date", "x-amz-content-sha256")}
        if operation != "list_objects_v2":
            # The path Cairn sends for the key is the one boto3 sends.
            assert url.path == "/bk/" + quote_path(params["Key"]), url.path
        ours = signer.headers(
            request.method, url.netloc, url.path,
            canonical_query(parse_qsl(url.query, keep_blank_values=True)), extra,
            payload=headers["x-amz-content-sha256"],
            now=calendar.timegm(time.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ")))
        assert ours["authorization"] == headers["authorization"], (operation, params)


def test_the_days_key_is_derived_again_when_the_date_changes() -> None:
    signer = Signer(ACCESS, SECRET, "us-east-1")
    one = signer.headers("GET", "h", "/b/k", now=calendar.timegm((2026, 11, 27, 23, 59, 59)))
    two = signer.headers("GET", "h", "/b/k", now=calendar.timegm((2026, 11, 28, 0, 0, 0)))
    assert "/20261127/" in one["authorization"]
    assert "/20261128/" in two["authorization"]
    fresh = Signer(ACCESS, SECRET, "us-east-1").headers(
        "GET", "h", "/b/k", now=calendar.timegm((2026, 11, 28, 0, 0, 0)))
    assert two == fresh
