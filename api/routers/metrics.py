"""GET /metrics for Prometheus: this process's request metrics (all of this host's API
processes in multiprocess mode) and the fleet's gauges, read from the database. Not part of
the REST API (absent from /openapi.json), and answered only to the networks in
`metrics_allowed_networks`: the gauges name projects and volumes."""

from __future__ import annotations

from ipaddress import ip_address

from fastapi import APIRouter, Request, Response

from services.errors import Forbidden
from services.metrics import exposition

router = APIRouter(include_in_schema=False)


@router.get("/metrics")
def metrics(request: Request) -> Response:
    settings = request.app.state.settings
    peer = request.client.host if request.client else ""
    try:
        address = ip_address(peer)
    except ValueError:
        address = None
    if address is None or not any(address in net for net in settings.metrics_allowed_networks):
        raise Forbidden(f"/metrics is not served to {peer or 'this client'}; an operator "
                        "allows Prometheus's network in CAIRN_METRICS_ALLOWED_NETWORKS")
    body, content_type = exposition.render(exposition.registry(), request.app.state.fleet)
    return Response(body, media_type=content_type)
