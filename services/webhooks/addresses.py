"""Where a webhook may point. Cairn's workers run inside the cloud: a URL that leads to a
private, loopback, link-local or otherwise special address could make them call the
metadata service, the database or an admin API on a tenant's behalf (server-side request
forgery). Such addresses are refused unless they lie in the operator's allowlist.

The check runs when the webhook is saved, and again on every attempt against the very
addresses the attempt then connects to (`transport`): a name is resolved once per attempt,
so a resolver that answers a public address to the check and an internal one to the
connection (DNS rebinding) gets nowhere.

What is refused is decided by allowing, not by listing the bad: an IPv4 address must be
globally routable unicast, an IPv6 address global unicast (2000::/3) outside the special
blocks. The IPv6 forms that carry an IPv4 address to a translator or tunnel (IPv4-mapped,
IPv4-compatible, SIIT, NAT64's well-known prefix, 6to4, Teredo) are judged by the IPv4
address they carry: `64:ff9b::a9fe:a9fe` is the metadata service through NAT64.

The operator may also refuse public networks (`webhook_refused_networks`): the cloud's own
public addresses (Keystone's, RGW's, Cairn's API), which a worker would reach from inside,
from an address those services may trust more than the internet's. Refused networks win
over allowed ones.

Messages never name what a name resolved to, nor whether it resolved at all: a tenant must
not learn the cloud's internal addresses or names from a 422."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from services.errors import InvalidInput, ServiceUnavailable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

RESOLVE_SECONDS = 5.0
"""The longest a webhook's name may take to resolve when it is saved."""

LOOKUPS = 64
"""Lookups one process runs at once. The C library's resolver cannot be interrupted, so a
lookup that outlives its caller's deadline keeps its thread until the resolver's own
timeouts end it; a name that never answers could otherwise leave a thread behind for
every attempt and every save. Past this a lookup fails at once, as a timeout. (A thread
waiting in the resolver costs its stack's few touched pages: 64 are a few MiB at most.)"""

_lookups = threading.BoundedSemaphore(LOOKUPS)

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

REFUSED_V4 = tuple(_V4(net) for net in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24",
    "192.88.99.0/24", "192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"))
"""IANA's IPv4 special-purpose registry (and multicast): none of it is a receiver on the
internet. 192.88.99.0/24 is the retired 6to4 relay anycast."""

GLOBAL_UNICAST_V6 = _V6("2000::/3")

REFUSED_V6 = tuple(_V6(net) for net in (
    "2001::/23", "2001:db8::/32", "2620:4f:8000::/48", "3fff::/20"))
"""Inside 2000::/3: IETF protocol assignments (ORCHID, benchmarking, AMT...; Teredo, also
in it, is judged by the addresses it carries), documentation, AS112."""

TEREDO = _V6("2001::/32")
SIX_TO_FOUR = _V6("2002::/16")
NAT64_WELL_KNOWN = _V6("64:ff9b::/96")
IPV4_MAPPED = _V6("::ffff:0:0/96")
IPV4_TRANSLATED = _V6("::ffff:0:0:0/96")
IPV4_COMPATIBLE = _V6("::/96")
"""Deprecated, but Linux's sit0 still routes `::a.b.c.d` to a.b.c.d when the module is
loaded. `::` and `::1` lie in it too; they carry 0.0.0.0 and 0.0.0.1 and are refused."""


@dataclass(frozen=True)
class Target:
    """A webhook URL's parts, as an attempt connects and asks."""

    scheme: str
    host: str
    """The name or address as written (IPv6 without brackets), lower case."""
    port: int
    path: str
    """The request target: path and query."""

    @property
    def shown(self) -> str:
        """`scheme://host[:port]` as anyone who sees the webhook may: an IP address as it
        is, a name by its last two labels only (`https://*.example.net` for
        `https://a1b2c3.m.example.net`): some receivers carry their token in the name."""
        host = self.host
        if ":" in host:
            host = f"[{host}]"
        elif not _is_address(host):
            labels = host.rstrip(".").split(".")
            if len(labels) > 2:
                host = "*." + ".".join(labels[-2:])
        default = 443 if self.scheme == "https" else 80
        return f"{self.scheme}://{host}" + ("" if self.port == default else f":{self.port}")

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def parse(url: str, *, field: str = "url") -> Target:
    """The URL's parts; InvalidInput (422) saying why it cannot be a webhook."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InvalidInput(f"{field} must be an http(s) URL with a host, not {url!r}",
                           field=field)
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(f"{field}: credentials in the URL are not accepted; verify the "
                           "signature instead", field=field)
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    if not 1 <= port <= 65535:
        # Port 0 is no port: connect() would reach whatever the stack makes of it.
        raise InvalidInput(f"{field}: the port is not a number from 1 to 65535",
                           field=field)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    if not all(0x21 <= ord(c) < 0x7F for c in path):
        raise InvalidInput(f"{field}: the path and query must be ASCII without spaces; "
                           "percent-encode other characters", field=field)
    host = parts.hostname.lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise InvalidInput(f"{field}: {parts.hostname!r} is not a valid host name",
                               field=field) from None
    return Target(parts.scheme, host, port, path)


def shown_host(url: str) -> str:
    """What a webhook's URL shows to everyone who sees the webhook (`Target.shown`)."""
    try:
        return parse(url).shown
    except InvalidInput:
        return urlsplit(url).scheme + "://?"


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def refused(address: Address, allowed: Sequence[Network],
            refused_networks: Sequence[Network] = ()) -> bool:
    """Whether an attempt may not connect to `address`."""
    carried = carried_ipv4(address)
    if refused_networks and (_within(address, refused_networks)
                             or any(_within(v4, refused_networks) for v4 in carried)):
        return True
    if _within(address, allowed) or (carried and all(_within(v4, allowed) for v4 in carried)):
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return _within(address, REFUSED_V4)
    if carried:
        return any(refused(v4, allowed, refused_networks) for v4 in carried)
    if address.scope_id or address not in GLOBAL_UNICAST_V6:
        # Zoned, ULA, link-local, site-local fec0::/10, multicast, discard, local-use
        # NAT64 64:ff9b:1::/48 (its translator is the operator's, its layout unknown here)...
        return True
    return _within(address, REFUSED_V6)


def carried_ipv4(address: Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 form hands to a translator or tunnel (none for others)."""
    if isinstance(address, ipaddress.IPv4Address):
        return ()
    if any(address in net for net in (IPV4_MAPPED, IPV4_TRANSLATED, NAT64_WELL_KNOWN,
                                      IPV4_COMPATIBLE)):
        return (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF),)
    if address in SIX_TO_FOUR:
        return (ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF),)
    if address in TEREDO and address.teredo is not None:
        return address.teredo  # (server, client): the relay's peer and the destination
    return ()


def _within(address: Address, networks: Sequence[Network]) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def check_addresses(host: str, addresses: Sequence[Address], allowed: Sequence[Network],
                    *, field: str = "url", refused_networks: Sequence[Network] = ()) -> None:
    """InvalidInput unless every address the host resolved to may be reached: a name that
    answers a public and an internal address at once is refused, whichever comes first."""
    if not addresses or any(refused(address, allowed, refused_networks)
                            for address in addresses):
        raise InvalidInput(
            f"{field}: {host!r} does not resolve to a public address; webhooks go to "
            "public addresses unless the operator allows the network "
            "(CAIRN_WEBHOOK_ALLOWED_NETWORKS)", field=field)


def check_url(url: str, allowed: Sequence[Network], *, field: str = "url",
              timeout: float = RESOLVE_SECONDS,
              refused_networks: Sequence[Network] = ()) -> tuple[Target, list[Address]]:
    """The URL's parts and the addresses it may be reached at, all of them checked;
    InvalidInput (422) saying why it may not be a webhook, ResolverBusy (503) when too many
    lookups are under way to start another."""
    target = parse(url, field=field)
    try:
        found = resolve(target.host, target.port, timeout)
    except ResolverBusy:
        raise ServiceUnavailable("too many webhook host names are being looked up at "
                                 "once; try again in a few seconds") from None
    except (OSError, TimeoutError, UnicodeError, ValueError):
        found = []
    check_addresses(target.host, found, allowed, field=field,
                    refused_networks=refused_networks)
    return target, found


class ResolverBusy(TimeoutError):
    """Every lookup this process may run at once is under way (`LOOKUPS`)."""


def resolve(host: str, port: int, timeout: float) -> list[Address]:
    """The host's addresses, in the resolver's order, from one lookup (an IP literal is
    its own answer). A resolver that does not answer within `timeout` raises
    TimeoutError; its lookup finishes on a thread of its own (the C library's resolver
    cannot be interrupted), bounded by the resolver's own timeouts, and at most LOOKUPS
    run at once (ResolverBusy, a TimeoutError, when that many are under way)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    gate = _lookups  # released by the lookup itself, whenever it ends
    if not gate.acquire(blocking=False):
        raise ResolverBusy(f"{LOOKUPS} lookups are under way in this process")
    answer: list[list[Address]] = []
    failure: list[BaseException] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                       proto=socket.IPPROTO_TCP)
            found: list[Address] = []
            for info in infos:
                text = str(info[4][0])
                address = ipaddress.ip_address(text.split("%", 1)[0])
                if isinstance(address, ipaddress.IPv6Address) and len(info[4]) > 3 \
                        and info[4][3]:
                    address = ipaddress.IPv6Address(f"{address}%{info[4][3]}")
                if address not in found:
                    found.append(address)
            answer.append(found)
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)
        finally:
            gate.release()

    thread = threading.Thread(target=lookup, name="webhook-resolve", daemon=True)
    try:
        thread.start()
    except BaseException:
        gate.release()
        raise
    thread.join(timeout)
    if failure:
        raise failure[0]
    if not answer:
        raise TimeoutError(f"resolving {host!r} took longer than {timeout:g} s")
    return answer[0]
