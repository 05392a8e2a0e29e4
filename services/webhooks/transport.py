"""One delivery attempt on the wire: an HTTP/1.1 POST to the address that was checked, under
one deadline, reading no more than the answer's head.

A general HTTP client does three things a webhook sender must not:
- it resolves the name again when it connects, after Cairn checked it, so a resolver that
  answers a public address first and an internal one next (DNS rebinding) sends the POST
  into the cloud. Here the name is resolved once, every address is checked
  (`addresses.check_addresses`), the socket connects to a checked address, and the peer
  it reached is checked again; TLS still verifies the certificate for the name (SNI), and
  the Host header carries the name;
- it honours HTTP(S)_PROXY from the environment: a proxy Cairn never chose would carry
  tenants' POSTs wherever it reaches. Only `webhook_proxy_url`, set by the operator, is
  used; it gets a CONNECT to the checked address, never the name, and reaching it (its
  own name resolved, each of its addresses tried) counts against the attempt's deadline
  too;
- its timeouts are per read: a receiver that trickles a byte every few seconds holds the
  sender forever, and one that floods its answer is buffered whole. Here one deadline
  covers resolving, connecting, TLS, sending and reading, and only the status line and
  headers are read, at most MAX_ANSWER_BYTES of them.
Redirects are never followed: a 3xx is the receiver's answer, and it failed.

What went wrong is told twice: a category for the tenant (`AttemptFailed.category`:
"connection refused", "timeout", "TLS certificate not valid for the host"...), never the
address, an internal host's answer or the error's text, and the detail for the operator's
log."""

from __future__ import annotations

import errno
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

import certifi
import h11

from services.errors import InvalidInput
from services.webhooks.addresses import (
    Address,
    Network,
    Target,
    check_addresses,
    parse,
    refused,
    resolve,
)

MAX_ANSWER_BYTES = 8 * 1024
"""The most of an answer an attempt reads: its status line and headers. The body is never
read (nothing in it changes the outcome), so a receiver that floods it costs one buffer."""

USER_AGENT = "Cairn-Webhooks/1"


class AttemptFailed(Exception):
    """An attempt that got no HTTP answer."""

    def __init__(self, category: str, detail: str) -> None:
        super().__init__(f"{category}: {detail}")
        self.category = category
        """What the tenant's delivery log shows."""
        self.detail = detail
        """What the operator's log shows."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; TimeoutError once there are none."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the attempt's {self.seconds:g} s are up")
        return left


@lru_cache(maxsize=1)
def default_tls() -> ssl.SSLContext:
    """Receivers' certificates are checked against certifi's CAs, for the URL's name."""
    return ssl.create_default_context(cafile=certifi.where())


def post(url: str, body: bytes, headers: Mapping[str, str], *, allowed: Sequence[Network],
         seconds: float, proxy: str | None = None, tls: ssl.SSLContext | None = None,
         refused_networks: Sequence[Network] = ()) -> int:
    """POST `body` to `url`; the answer's status code. AttemptFailed when there is none,
    InvalidInput when the URL may not be reached (anymore)."""
    target = parse(url)
    deadline = Deadline(seconds)
    try:
        try:
            addresses = resolve(target.host, target.port, deadline.left())
        except TimeoutError:
            raise
        except (OSError, UnicodeError, ValueError):
            # Told as an internal answer is: whether a name resolves at all is the cloud
            # resolver's to know (a tenant's CNAME can point at internal names).
            addresses = []
        check_addresses(target.host, addresses, allowed, refused_networks=refused_networks)
        if proxy is None:
            sock = _connect_first(addresses, target.port, deadline,
                                  lambda sock, address: _check_peer(sock, address, allowed,
                                                                    refused_networks))
        else:
            sock = _connect_through(parse(proxy, field="webhook_proxy_url"), target,
                                    addresses[0], deadline)
        try:
            if target.scheme == "https":
                sock = _start_tls(sock, target.host, tls or default_tls(), deadline)
            return _exchange(sock, target, body, headers, deadline)
        finally:
            sock.close()
    except TimeoutError as exc:
        raise AttemptFailed(f"timeout (no answer within {seconds:g} s)", str(exc)) from None
    except InvalidInput:
        raise
    except ssl.SSLCertVerificationError as exc:
        raise AttemptFailed("TLS certificate not valid for the host", str(exc)) from None
    except ssl.SSLError as exc:
        raise AttemptFailed("TLS handshake failed", str(exc)) from None
    except h11.RemoteProtocolError as exc:
        raise AttemptFailed("the answer is not valid HTTP/1.1", str(exc)) from None
    except ConnectionRefusedError as exc:
        raise AttemptFailed("connection refused", str(exc)) from None
    except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
        raise AttemptFailed("connection closed before an answer", str(exc)) from None
    except OSError as exc:
        if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            raise AttemptFailed("host unreachable", str(exc)) from None
        raise AttemptFailed("connection failed", f"{type(exc).__name__}: {exc}") from None


def _connect_first(addresses: Sequence[Address], port: int, deadline: Deadline,
                   check: Callable[[socket.socket, Address], None] | None = None
                   ) -> socket.socket:
    """A socket connected to the first of `addresses` that answers (and passes `check`);
    each gets its share of the time left, so one that never answers does not starve the
    next."""
    last: OSError | None = None
    for index, address in enumerate(addresses):
        sock = socket.socket(socket.AF_INET6 if address.version == 6 else socket.AF_INET,
                             socket.SOCK_STREAM)
        try:
            sock.settimeout(deadline.left() / (len(addresses) - index))
            sock.connect(_sockaddr(address, port))
            if check is not None:
                check(sock, address)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
        except BaseException:
            sock.close()
            raise
    if last is None:
        raise OSError(errno.EHOSTUNREACH, "no address to connect to")
    raise last


def _check_peer(sock: socket.socket, address: Address, allowed: Sequence[Network],
                refused_networks: Sequence[Network]) -> None:
    """The socket reached the address it was told to, and that address may be reached:
    nothing between resolving and connecting (a library, a wrapper, a changed setting)
    swapped the destination."""
    peer = ipaddress.ip_address(str(sock.getpeername()[0]).split("%", 1)[0])
    if peer != ipaddress.ip_address(str(address).split("%", 1)[0]) \
            or refused(peer, allowed, refused_networks):
        raise AttemptFailed("connection refused by Cairn's address policy",
                            f"connected to {peer}, not the checked {address}")


def _connect_through(proxy: Target, target: Target, address: Address,
                     deadline: Deadline) -> socket.socket:
    """A tunnel to the checked address through the operator's proxy (CONNECT to the
    address, not the name: the proxy resolves nothing). The proxy's own name is resolved
    and its addresses tried under the attempt's deadline, like a receiver's (the proxy is
    the operator's: its addresses are not checked)."""
    try:
        proxies = resolve(proxy.host, proxy.port, deadline.left())
    except TimeoutError:
        raise
    except (OSError, UnicodeError, ValueError) as exc:
        raise AttemptFailed("the proxy could not be reached",
                            f"resolving proxy {proxy.host}: {exc}") from None
    sock = _connect_first(proxies, proxy.port, deadline)
    try:
        authority = f"[{address}]:{target.port}" if address.version == 6 \
            else f"{address}:{target.port}"
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_ANSWER_BYTES)
        sock.settimeout(deadline.left())
        sock.sendall(conn.send(h11.Request(method="CONNECT", target=authority,
                                           headers=[("Host", authority),
                                                    ("User-Agent", USER_AGENT)])))
        status = _answer_status(sock, conn, deadline)
        if not 200 <= status < 300:
            raise AttemptFailed("the proxy refused the connection",
                                f"proxy {proxy.host}:{proxy.port} answered {status} to "
                                f"CONNECT {authority}")
        if conn.trailing_data[0]:
            raise h11.RemoteProtocolError("the proxy sent data after its CONNECT answer")
        return sock
    except BaseException:
        sock.close()
        raise


def _start_tls(sock: socket.socket, host: str, tls: ssl.SSLContext,
               deadline: Deadline) -> socket.socket:
    wrapped = tls.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    wrapped.settimeout(deadline.left())
    wrapped.do_handshake()
    return wrapped


def _exchange(sock: socket.socket, target: Target, body: bytes, headers: Mapping[str, str],
              deadline: Deadline) -> int:
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_ANSWER_BYTES)
    request = h11.Request(method="POST", target=target.path, headers=[
        ("Host", target.host_header), ("User-Agent", USER_AGENT),
        ("Content-Length", str(len(body))), ("Connection", "close"), *headers.items()])
    data = conn.send(request) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
    sock.settimeout(deadline.left())
    sock.sendall(data)  # a receiver that does not read holds it until the deadline
    return _answer_status(sock, conn, deadline)


def _answer_status(sock: socket.socket, conn: h11.Connection, deadline: Deadline) -> int:
    """The status of the answer's head, read within the deadline and MAX_ANSWER_BYTES."""
    taken = 0
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Response):
            return event.status_code
        if event is not h11.NEED_DATA:
            continue  # 1xx: the answer is still to come
        if taken >= MAX_ANSWER_BYTES:
            raise h11.RemoteProtocolError(
                f"the answer's head is longer than {MAX_ANSWER_BYTES} bytes")
        sock.settimeout(deadline.left())
        chunk = sock.recv(min(4096, MAX_ANSWER_BYTES - taken))
        if not chunk:
            raise ConnectionResetError("the peer closed the connection before its answer")
        taken += len(chunk)
        conn.receive_data(chunk)


def _sockaddr(address: Address, port: int) -> tuple[str, int] | tuple[str, int, int, int]:
    if isinstance(address, ipaddress.IPv4Address):
        return (str(address), port)
    scope = address.scope_id or ""
    index = int(scope) if scope.isdigit() else socket.if_nametoindex(scope) if scope else 0
    return (str(address).split("%", 1)[0], port, 0, index)
