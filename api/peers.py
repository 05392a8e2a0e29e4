"""The client's address, as far as Cairn can trust it: the TCP peer's, unless the peer is one
of the proxies an operator named (`api_trusted_proxies`), whose X-Forwarded-For is then read
from the right, past every trusted proxy, to the first address none of them is. A client
writes whatever it likes into X-Forwarded-For; only what a trusted proxy appended counts.
The request gate keys anonymous callers by it (an IPv6 address by its /64), and the
portal's sign-in throttle counts by it."""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from starlette.types import Scope

Network = IPv4Network | IPv6Network


def client_address(scope: Scope, trusted_proxies: Sequence[Network]) -> str:
    peer = str((scope.get("client") or ("", 0))[0])
    if not trusted_proxies or not _trusted(_parse(peer), trusted_proxies):
        return peer
    hops = [hop.strip() for name, value in scope.get("headers", ())
            if name == b"x-forwarded-for"
            for hop in value.decode("latin-1").split(",") if hop.strip()]
    nearest = peer
    for hop in reversed(hops):
        address = _parse(hop)
        if address is None:
            # Not what a proxy writes: whatever lies beyond it is the client's own text.
            return nearest
        if not _trusted(address, trusted_proxies):
            return str(address)
        nearest = str(address)
    return nearest


def client_network(address: str) -> str:
    """What counts as one client for limits: an IPv4 address, or an IPv6 address's /64
    (one host is routinely given a whole /64, and would otherwise be 2^64 clients)."""
    parsed = _parse(address)
    if isinstance(parsed, IPv6Address) and parsed.ipv4_mapped is None:
        return str(IPv6Network(f"{parsed}/64", strict=False))
    if isinstance(parsed, IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return address


def _parse(text: str) -> IPv4Address | IPv6Address | None:
    try:
        return ip_address(text)
    except ValueError:
        return None


def _trusted(address: IPv4Address | IPv6Address | None, networks: Sequence[Network]) -> bool:
    return address is not None and any(address in net for net in networks)
