"""The portal's session on the real app (noauth): the cookie is `__Host-` prefixed,
Secure, HttpOnly and SameSite=Strict, scopes every request to its project, lets reads
through, and lets a change through only with the session's CSRF token; a forged cookie is
no session, and a signed-out one opens nowhere. The built portal is served at `/` with its
own routes, and the API reference at `/docs` from the same origin only, while unknown API
paths stay JSON 404s."""

from __future__ import annotations

import re

import pytest
import rados
import rbd
from fastapi.testclient import TestClient

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph


COOKIE = "__Host-cairn_session"


def _browser(stack: Stack) -> TestClient:
    """A client of its own: the stack's shared one must not carry a session cookie. Over
    https, as a browser keeps a Secure cookie for https (and for http://127.0.0.1)."""
    return TestClient(stack.client.app, base_url="https://testserver")


def test_a_noauth_session_scopes_reads_and_needs_its_csrf_token_for_changes(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    volume = ceph.unique_name("portal")
    images.append(volume)
    rbd.RBD().create(volumes_pool, volume, MiB)
    browser = _browser(stack)
    assert browser.get("/v1/session/options").json() == {"auth_strategy": "noauth"}
    assert browser.get("/v1/session").status_code == 401
    missing = browser.post("/v1/session", json={})
    assert missing.status_code == 422
    assert "name the project" in missing.json()["error"]["message"]

    signed = browser.post("/v1/session", json={"project_id": "portal-a"})
    assert signed.status_code == 200, signed.text
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    attributes = [a.strip().lower() for a in cookie.split(";")[1:]]
    # What a browser requires of a __Host- cookie: Secure, Path=/, no Domain.
    assert {"httponly", "secure", "path=/", "samesite=strict"} <= set(attributes), cookie
    assert not any(a.startswith("domain") for a in attributes), cookie
    body = signed.json()
    assert body["project_id"] == "portal-a"
    assert "backup:create" in body["allowed"]
    assert "quota:update" not in body["allowed"]
    csrf = body["csrf_token"]

    assert browser.get("/v1/session").json()["csrf_token"] == csrf
    jobs = browser.get("/v1/jobs")
    assert jobs.status_code == 200, jobs.text
    plan = {"name": "portal-plan", "volumes": [f"ceph-a/volumes/{volume}"],
            "rules": [{"cron": "0 3 * * *"}]}
    refused = browser.post("/v1/plans", json=plan)
    assert refused.status_code == 403, refused.text
    assert "X-CSRF-Token" in refused.json()["error"]["message"]
    wrong = browser.post("/v1/plans", json=plan, headers={"X-CSRF-Token": csrf + "x"})
    assert wrong.status_code == 403
    made = browser.post("/v1/plans", json=plan, headers={"X-CSRF-Token": csrf})
    assert made.status_code == 201, made.text
    assert browser.get(f"/v1/plans/{made.json()['id']}").status_code == 200
    # Scoped to its project: another project's caller does not see the plan.
    other = stack.get(f"/v1/plans/{made.json()['id']}")
    assert other.status_code == 404

    switched = browser.put("/v1/session/project", json={"project_id": "portal-b"},
                           headers={"X-CSRF-Token": csrf})
    assert switched.status_code == 200, switched.text
    assert browser.get(f"/v1/plans/{made.json()['id']}").status_code == 404
    csrf = switched.json()["csrf_token"]

    assert browser.delete("/v1/session").status_code == 403  # signing out is a change too
    out = browser.delete("/v1/session", headers={"X-CSRF-Token": csrf})
    assert out.status_code == 200, out.text
    assert out.json()["tokens_revoked"] is True
    assert out.json()["ended_everywhere"] is True
    assert browser.get("/v1/session").status_code == 401
    assert stack.client.delete(f"/v1/plans/{made.json()['id']}",
                               headers={"X-Project-Id": "portal-a"}).status_code == 204


def test_a_copy_of_a_signed_out_session_opens_nowhere(stack: Stack) -> None:
    # Before: the cookie was the session's only copy; signing out deleted it from the
    # browser, and any copy (a thief's) went on working until it expired (12 hours here).
    browser = _browser(stack)
    signed = browser.post("/v1/session", json={"project_id": "portal-copy"})
    assert signed.status_code == 200, signed.text
    copy = TestClient(stack.client.app, base_url="https://testserver")
    for name, value in browser.cookies.items():
        copy.cookies.set(name, value)
    assert copy.get("/v1/jobs").status_code == 200
    out = browser.delete("/v1/session", headers={"X-CSRF-Token": signed.json()["csrf_token"]})
    assert out.is_success, out.text
    refused = copy.get("/v1/jobs")
    assert refused.status_code == 401, refused.text
    assert copy.get("/v1/session").status_code == 401
    assert copy.post("/v1/plans", json={}, headers={
        "X-CSRF-Token": signed.json()["csrf_token"]}).status_code == 401


def test_a_session_cookie_over_plain_http_or_by_another_name_is_none(stack: Stack) -> None:
    browser = _browser(stack)
    signed = browser.post("/v1/session", json={"project_id": "portal-plain"})
    value = browser.cookies[COOKIE]
    # The unprefixed name a sibling host or a plain-HTTP page could plant is not read.
    planted = TestClient(stack.client.app, base_url="https://testserver")
    planted.cookies.set("cairn_session", value)
    assert planted.get("/v1/jobs").status_code == 401
    assert signed.status_code == 200


def test_a_forged_session_cookie_is_refused(stack: Stack) -> None:
    browser = _browser(stack)
    browser.cookies.set(COOKIE, "eyJwcm9qZWN0X2lkIjogImFkbWluIn0")
    refused = browser.get("/v1/jobs")
    assert refused.status_code == 401
    assert "sign in again" in refused.json()["error"]["message"]


def test_the_portal_is_served_at_the_root_and_the_api_keeps_its_paths(stack: Stack) -> None:
    browser = _browser(stack)
    for path in ("/", "/volumes", "/volumes?unprotected", "/jobs/123"):
        page = browser.get(path)
        assert page.status_code == 200, (path, page.text[:200])
        assert '<div id="root">' in page.text, "portal/dist is missing: run `make portal`"
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    asset = next(p for p in page.text.split('"') if p.startswith("/assets/"))
    script = browser.get(asset, headers={"Accept-Encoding": "gzip"})
    assert script.status_code == 200
    # Sent compressed and kept by the browser: a new build names its assets anew.
    assert script.headers["content-encoding"] == "gzip"
    assert "immutable" in script.headers["cache-control"]
    assert script.num_bytes_downloaded < len(script.content) / 2
    for path in ("/v1/nothing-here", "/openapi.json/x", "/docs/../v1/x"):
        missing = browser.get(path)
        assert missing.status_code == 404, path
        assert missing.headers["content-type"].startswith("application/json")
    assert browser.get("/../../etc/passwd").text.find("root:") == -1


def test_the_api_reference_loads_nothing_from_another_origin(stack: Stack) -> None:
    """Before: FastAPI's /docs and /redoc pulled their scripts from a CDN into a page of the
    portal's origin, where such a script can read the session's CSRF token."""
    browser = _browser(stack)
    page = browser.get("/docs")
    assert page.status_code == 200, page.text[:300]
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sources
    assert all(s.startswith("/") and not s.startswith("//") for s in sources), sources
    assert "<script>" not in page.text  # no inline script: the policy would block it
    for source in sources:
        assert browser.get(source).status_code == 200, source
    assert "http" not in browser.get("/api-docs/init.js").text  # nothing fetched elsewhere
    assert browser.get("/redoc", follow_redirects=False).headers["location"] == "/docs"
    assert browser.get("/openapi.json").status_code == 200
