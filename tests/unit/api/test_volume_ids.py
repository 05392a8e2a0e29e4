"""GET /v1/volumes/{volume_id} takes what GET /v1/volumes lists: a Cinder id, or an RBD
image's cluster/pool/image, its slashes encoded or not, and leaves a volume's other routes
(`/v1/volumes/<id>/file-versions`) to themselves."""

from __future__ import annotations

from starlette.routing import Match, Route
from starlette.types import Scope

import api.params  # noqa: F401  (registers the `volume` convertor)

CINDER = "3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41"
ONE = Route("/v1/volumes/{volume_id:volume}", lambda r: None)
VERSIONS = Route("/v1/volumes/{volume_id}/file-versions", lambda r: None)


def _match(route: Route, path: str) -> tuple[Match, Scope]:
    return route.matches({"type": "http", "path": path, "method": "GET"})


def test_a_cinder_id_or_an_image_ref_is_one_volume() -> None:
    for volume in (CINDER, "ceph-a/volumes/demo", "ceph-a/volumes/web_1.v2"):
        match, scope = _match(ONE, f"/v1/volumes/{volume}")
        assert match == Match.FULL
        assert scope["path_params"] == {"volume_id": volume}


def test_other_volume_routes_are_not_taken_for_a_volume() -> None:
    assert _match(ONE, f"/v1/volumes/{CINDER}/file-versions")[0] == Match.NONE
    assert _match(VERSIONS, f"/v1/volumes/{CINDER}/file-versions")[0] == Match.FULL
    for not_one in ("ceph-a/volumes", "ceph-a/volumes/demo/x", "ceph-a//demo",
                    "../volumes/demo"):
        assert _match(ONE, f"/v1/volumes/{not_one}")[0] == Match.NONE
