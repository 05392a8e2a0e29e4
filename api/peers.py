"""The client's address, as far as Cairn can trust it: the TCP peer's, unless the peer is one
of the proxies an operator named (`api_trusted_proxies`), whose X-Forwarded-For is then read
from the right, past every trusted proxy, to the first address none of them is. A client
writes whatever it likes into X-Forwarded-For; only what a trusted proxy appended counts.

What counts as one client for limits (`client_network`) is coarser than an address: the
door's slots, its Keystone lanes and the portal's sign-in throttle count by it."""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from starlette.types import Scope

Network = IPv4Network | IPv6Network

SITE_PREFIX = 48
"""An IPv6 client counts as its /48. One host is routinely given a /64 and one site a /48 or
a /56 (RFC 6177), so counting by /64 made one site 65,536 clients, each with limits of its
own; a /48 is to IPv6 what one NAT address is to IPv4: everyone behind it shares."""


def client_address(scope: Scope, trusted_proxies: Sequence[Network]) -> str:
    peer = _parse(str((scope.get("client") or ("", 0))[0]))
    if peer is None:
        return str((scope.get("client") or ("", 0))[0])
    if not trusted_proxies or not _trusted(peer, trusted_proxies):
        return str(peer)
    hops = [hop.strip() for name, value in scope.get("headers", ())
            if name == b"x-forwarded-for"
            for hop in value.decode("latin-1").split(",") if hop.strip()]
    nearest = peer
    for hop in reversed(hops):
        address = _parse_hop(hop)
        if address is None:
            # Not what a proxy writes: whatever lies beyond it is the client's own text.
            return str(nearest)
        if not _trusted(address, trusted_proxies):
            return str(address)
        nearest = address
    return str(nearest)


def client_network(address: str) -> str:
    """What counts as one client for limits: an IPv4 address; an IPv6 address's /48; the
    IPv4 address inside a 6to4 or Teredo address (one IPv4 host would otherwise own
    2^80 of them)."""
    parsed = _parse(address)
    if parsed is None:
        return address
    if isinstance(parsed, IPv4Address):
        return str(parsed)
    embedded = parsed.sixtofour or (parsed.teredo[1] if parsed.teredo else None)
    if embedded is not None:
        return str(embedded)
    return str(IPv6Network(f"{parsed}/{SITE_PREFIX}", strict=False))


def _parse(text: str) -> IPv4Address | IPv6Address | None:
    """An address, with an IPv4 peer on a dual-stack socket (::ffff:10.0.0.5) as the IPv4
    address it is, so that IPv4 trusted proxies and limits apply to it."""
    try:
        address = ip_address(text)
    except ValueError:
        return None
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _parse_hop(hop: str) -> IPv4Address | IPv6Address | None:
    """A hop of X-Forwarded-For as proxies write it: an address, an IPv4 address with a port
    (`1.2.3.4:5678`), or a bracketed IPv6 address with or without one (`[2001:db8::1]:443`)."""
    if hop.startswith("["):
        inside, bracket, rest = hop[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return _parse(inside)
    host, colon, port = hop.partition(":")
    if colon and ":" not in port and port.isdigit():
        return _parse(host)
    return _parse(hop)


def _trusted(address: IPv4Address | IPv6Address | None, networks: Sequence[Network]) -> bool:
    return address is not None and any(address in net for net in networks)
