"""One delivery attempt on the wire, against real servers on loopback: it ends within its
deadline whatever the receiver does (trickles its answer forever, floods it), connects to
the address it checked and no other, verifies TLS for the URL's name (SNI), goes through
the operator's proxy only as a CONNECT to the checked address, with reaching the proxy
inside the deadline too, and refuses what the operator refuses. Redirects are never
followed (tests/integration/api/test_webhooks.py)."""

from __future__ import annotations

import datetime
import ipaddress
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services.errors import InvalidInput
from services.webhooks import transport
from services.webhooks.transport import AttemptFailed
from tests.support import scripted_dns
from tests.support.redis_server import free_port
from tests.support.webhook_receiver import HostileReceiver, Receiver

pytestmark = pytest.mark.production_database_only

LOOPBACK = [ipaddress.ip_network("127.0.0.0/8")]


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's host names resolve to loopback in this process."""
    resolve, _ = scripted_dns.scripted({"names": {
        name: [["127.0.0.1"]] for name in ("hooks.tls.test", "other.tls.test",
                                           "hooks.proxy.test")}})
    monkeypatch.setattr(socket, "getaddrinfo", resolve)


@pytest.mark.parametrize("mode", ["trickle", "flood"])
def test_an_attempt_ends_within_its_deadline_whatever_the_receiver_sends(mode: str) -> None:
    hostile = HostileReceiver(mode, interval=0.5)
    try:
        started = time.monotonic()
        try:
            status: int | str = transport.post(hostile.url, b"{}", {}, allowed=LOOPBACK,
                                               seconds=2)
        except AttemptFailed as exc:
            status = exc.category
        took = time.monotonic() - started
    finally:
        hostile.close()
    # A trickle never finishes its head: cut off at the deadline. A flood's status is read
    # and its endless body never is.
    assert status == ("timeout (no answer within 2 s)" if mode == "trickle" else 500)
    assert took < 2.5, took


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for hooks.tls.test."""
    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("cairn test CA"))
          .issuer_name(name("cairn test CA")).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(hours=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("hooks.tls.test"))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.tls.test")]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class TLSReceiver:
    def __init__(self, cert: Path, key: Path) -> None:
        self.server_names: list[str | None] = []
        self.hosts: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver.hosts.append(self.headers["host"])
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.sni_callback = lambda _sock, name, _ctx: self.server_names.append(name)
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tls_receiver(tmp_path: Path) -> Iterator[tuple[TLSReceiver, ssl.SSLContext]]:
    ca, cert, key = _certificates(tmp_path)
    receiver = TLSReceiver(cert, key)
    yield receiver, ssl.create_default_context(cafile=str(ca))
    receiver.close()


def test_tls_is_verified_for_the_urls_name_at_the_checked_address(
        names: None, tls_receiver: tuple[TLSReceiver, ssl.SSLContext]) -> None:
    receiver, trusted = tls_receiver
    url = f"https://hooks.tls.test:{receiver.port}/hook"
    assert transport.post(url, b"{}", {}, allowed=LOOPBACK, seconds=5, tls=trusted) == 204
    assert receiver.server_names == ["hooks.tls.test"]
    assert receiver.hosts == [f"hooks.tls.test:{receiver.port}"]
    with pytest.raises(AttemptFailed) as wrong_name:
        transport.post(f"https://other.tls.test:{receiver.port}/hook", b"{}", {},
                       allowed=LOOPBACK, seconds=5, tls=trusted)
    assert wrong_name.value.category == "TLS certificate not valid for the host"
    with pytest.raises(AttemptFailed) as untrusted:
        transport.post(url, b"{}", {}, allowed=LOOPBACK, seconds=5)  # certifi's CAs
    assert untrusted.value.category == "TLS certificate not valid for the host"


def test_a_peer_other_than_the_checked_address_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Something between resolving and connecting (here a connect() that redirects, as a
    wrapper or a transparent proxy could) takes the socket elsewhere: no request goes."""
    internal = Receiver()
    resolve, _ = scripted_dns.scripted({"names": {"hooks.public.test": [["93.184.215.14"]]}})
    real_connect = socket.socket.connect

    def redirected(sock: socket.socket, address: Any) -> None:
        if address[0] == "93.184.215.14":
            address = ("127.0.0.1", internal.port)
        real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket.socket, "connect", redirected)
    try:
        with pytest.raises(AttemptFailed) as refused:
            transport.post(f"http://hooks.public.test:{internal.port}/hook", b"{}", {},
                           allowed=[], seconds=5)
        assert refused.value.category == "connection refused by Cairn's address policy"
        time.sleep(0.2)  # a request would have arrived by now
        assert internal.received == []
    finally:
        internal.close()


class ConnectProxy:
    """An operator's HTTP proxy: CONNECT only, each tunnel relayed byte for byte."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                head += client.recv(4096)
            method, authority, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            self.asked.append(f"{method} {authority}")
            host, port = authority.rsplit(":", 1)
            with socket.create_connection((host.strip("[]"), int(port))) as upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                while True:
                    ready, _, _ = select.select([client, upstream], [], [], 5)
                    if not ready:
                        return
                    for sock in ready:
                        data = sock.recv(65536)
                        if not data:
                            return
                        (upstream if sock is client else client).sendall(data)

    def close(self) -> None:
        self.listener.close()


def test_the_operators_proxy_gets_a_connect_to_the_checked_address(names: None) -> None:
    receiver, proxy = Receiver(), ConnectProxy()
    try:
        status = transport.post(f"http://hooks.proxy.test:{receiver.port}/hook", b"{}",
                                {"webhook-id": "x"}, allowed=LOOPBACK, seconds=5,
                                proxy=f"http://127.0.0.1:{proxy.port}")
        assert status == 200
        assert proxy.asked == [f"CONNECT 127.0.0.1:{receiver.port}"]  # the address, no name
        (request,) = receiver.received
        assert request.headers["host"] == f"hooks.proxy.test:{receiver.port}"
        assert request.headers["webhook-id"] == "x"
    finally:
        receiver.close()
        proxy.close()


def test_reaching_the_operators_proxy_counts_against_the_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy whose name takes 6 s to resolve ends a 2 s attempt at 2 s: past its deadline
    (and the claim's margin) a second attempt could start while this one still ran."""
    real = socket.getaddrinfo

    def slow(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "slow-proxy.test":
            time.sleep(6)
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    started = time.monotonic()
    with pytest.raises(AttemptFailed) as failed:
        transport.post("http://8.8.8.8/hook", b"{}", {}, allowed=[], seconds=2,
                       proxy="http://slow-proxy.test:3128")
    took = time.monotonic() - started
    assert failed.value.category == "timeout (no answer within 2 s)"
    assert took < 2.5, took


def test_networks_the_operator_refuses_are_refused_at_every_attempt() -> None:
    """Refused networks win over allowed ones, when an attempt connects as when a webhook
    is saved; so does a URL whose port is 0 (no port, not port 80)."""
    receiver = Receiver()
    try:
        with pytest.raises(InvalidInput, match="does not resolve to a public address"):
            transport.post(receiver.url, b"{}", {}, allowed=LOOPBACK, seconds=2,
                           refused_networks=[ipaddress.ip_network("127.0.0.1/32")])
        with pytest.raises(InvalidInput, match="port"):
            transport.post("http://127.0.0.1:0/hook", b"{}", {}, allowed=LOOPBACK,
                           seconds=2)
        assert receiver.received == []
        assert transport.post(receiver.url, b"{}", {}, allowed=LOOPBACK, seconds=2,
                              refused_networks=[ipaddress.ip_network("127.0.0.2/32")]) == 200
    finally:
        receiver.close()
