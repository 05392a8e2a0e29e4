"""Under `noauth` whoever reaches cairn-api is whoever its headers say (`X-Roles: admin`
with an admin project's id is the cloud's administrator): only clients on this host may.
`cairn-api` refuses to listen beyond loopback then, but a process started some other way
(`uvicorn api.main:create_app --factory --host 0.0.0.0`, a container's own command) never
passes that check; this middleware refuses, on every request, a client whose TCP peer is
not a loopback address, unless the operator said otherwise (`noauth_allow_remote`)."""

from __future__ import annotations

import ipaddress
import json

from starlette.types import ASGIApp, Receive, Scope, Send

REFUSAL = ("this Cairn runs CAIRN_AUTH_STRATEGY=noauth, which believes whoever reaches it: "
           "it answers clients on its own host (loopback) only. Use keystone, or set "
           "CAIRN_NOAUTH_ALLOW_REMOTE=true on a development machine whose network you trust")


def local_peer(client: tuple[str, int] | list[object] | None) -> bool:
    """Whether an ASGI scope's client is on this host: a loopback address, or no network
    peer at all (a Unix socket has none; an in-process client such as Starlette's test
    client names no address)."""
    if client is None:
        return True
    try:
        address = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return True  # not an address: no TCP peer (servers give one as an address)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1, a dual-stack socket's loopback
    return address.is_loopback


class LoopbackOnly:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or local_peer(scope.get("client")):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": {"code": "forbidden", "message": REFUSAL,
                                     "details": None}}).encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
