"""Where a webhook may point. Cairn's workers run inside the cloud: a URL that resolves to a
private, loopback, link-local or otherwise special address could make them call the
metadata service, the database or an admin API on a tenant's behalf (server-side request
forgery). Such targets are refused unless they lie in the operator's allowlist; the check
runs when the webhook is saved and again before every attempt (DNS may change)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

from services.errors import InvalidInput

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def check_url(url: str, allowed: Sequence[Network], *, field: str = "url") -> None:
    """Raises InvalidInput (422) saying why the URL may not be a webhook."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InvalidInput(f"{field} must be an http(s) URL with a host, not {url!r}",
                           field=field)
    if parts.username or parts.password:
        raise InvalidInput(f"{field}: credentials in the URL are not accepted; verify the "
                           "signature instead", field=field)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        found = {str(info[4][0]) for info in socket.getaddrinfo(parts.hostname, port,
                                                           proto=socket.IPPROTO_TCP)}
    except (OSError, ValueError, UnicodeError) as exc:
        raise InvalidInput(f"{field}: host {parts.hostname!r} does not resolve ({exc})",
                           field=field) from None
    for text in sorted(found):
        address = ipaddress.ip_address(text.split("%", 1)[0])
        if _special(address) and not any(address in net for net in allowed):
            raise InvalidInput(
                f"{field}: {parts.hostname!r} resolves to {address}, a private, loopback, "
                "link-local or reserved address; webhooks go to public addresses unless "
                "the operator allows the network (CAIRN_WEBHOOK_ALLOWED_NETWORKS)",
                field=field)


def _special(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _special(address.ipv4_mapped)
    return not address.is_global or address.is_multicast
