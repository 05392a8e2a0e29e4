"""The portal's typed client is generated from the committed OpenAPI document: a change to
the API must regenerate it (`make portal`), or the portal compiles against a stale API."""

from __future__ import annotations

from pathlib import Path

from api.openapi_dump import document

COMMITTED = Path(__file__).resolve().parents[3] / "portal" / "src" / "api" / "openapi.json"


def test_the_portals_copy_of_the_openapi_document_is_current() -> None:
    assert COMMITTED.read_text() == document(), (
        "portal/src/api/openapi.json is stale: run `make portal` and commit "
        "portal/src/api/openapi.json and portal/src/api/schema.d.ts")
