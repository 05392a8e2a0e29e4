"""An S3 endpoint in the test's own process, on a Unix socket (the unit tier connects to
no network address): it keeps objects in a dict (PUT, conditional with `If-None-Match: *`,
GET, HEAD, DELETE, and ListObjectsV2 of bucket `b`, paged), checks nothing of the
signature, and answers a test's scripted replies first. It counts the connections it
accepted and the most it held open at once. With `tls`, it speaks HTTPS as `s3.test`, under
a certificate of its own that its pools trust."""

from __future__ import annotations

import datetime
import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote_plus, unquote, urlsplit
from xml.sax.saxutils import escape

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services.settings import S3Settings
from services.storage.http_pool import ConnectionPool
from services.storage.resolver import Address

Reply = Callable[["Handler"], None]


def error_body(code: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            "<Message>as the test said</Message></Error>").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
               *, length: int | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    def _handle(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with fake.lock:
            fake.seen.append((self.command, self.path, dict(self.headers.items())))
            reply = fake.replies.pop(0) if fake.replies else None
        if reply is not None:
            reply(self)
            return
        key = self.path
        if self.command == "GET" and urlsplit(key).path == "/b":
            self.answer(200, fake.listing(dict(parse_qsl(urlsplit(key).query))),
                        {"Content-Type": "application/xml"})
        elif self.command == "PUT" and self.headers.get("If-None-Match") == "*" \
                and key in fake.objects:
            self.answer(412, error_body("PreconditionFailed"),
                        {"Content-Type": "application/xml"})
        elif self.command == "PUT":
            fake.objects[key] = body
            self.answer(200)
        elif self.command == "DELETE":
            fake.objects.pop(key, None)
            self.answer(204)
        elif key not in fake.objects:
            self.answer(404, error_body("NoSuchKey"), {"Content-Type": "application/xml"})
        else:
            self.answer(200, fake.objects[key])

    def do_GET(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()
        super().setup()
        fake = self.server.fake
        with fake.lock:
            fake.accepted += 1
            fake.open_now += 1
            fake.most_open = max(fake.most_open, fake.open_now)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.fake.lock:
                self.server.fake.open_now -= 1

    def address_string(self) -> str:
        return "unix"

    def log_message(self, *_args: Any) -> None:
        pass


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    fake: FakeS3

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up on an answer it refused

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.fake.tls is not None:  # the handshake in the handler's thread, not here
            sock = self.fake.tls.wrap_socket(sock, server_side=True,
                                             do_handshake_on_connect=False)
        return sock, address


def _certificate(directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server's context for `s3.test`, and a client's that trusts it (and nothing else)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "s3.test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("s3.test")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "s3.crt", directory / "s3.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    return server, ssl.create_default_context(cafile=str(cert_file))


class UnixPool(ConnectionPool):
    """A ConnectionPool whose connections reach the fake's socket: its name "resolves" to
    the socket's path, and the pool's own `connect` opens it."""

    socket_path = ""

    def _addresses(self, until: float) -> Sequence[Address]:
        return [(socket.AF_UNIX, socket.SOCK_STREAM, 0, "", self.socket_path)]


class FakeS3:
    def __init__(self, directory: Path, *, tls: bool = False) -> None:
        self.path = str(directory / "s3.sock")
        self.tls, self._trusting = _certificate(directory) if tls else (None, None)
        self.objects: dict[str, bytes] = {}
        self.replies: list[Reply] = []
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.lock = threading.Lock()
        self.accepted = self.open_now = self.most_open = 0
        self.server = _Server(self.path, Handler)
        self.server.fake = self
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def listing(self, params: dict[str, str]) -> bytes:
        """ListObjectsV2's answer for `params`: keys in order, `max-keys` at most, the
        continuation token the last key listed (hex)."""
        prefix = params.get("prefix", "")
        after = bytes.fromhex(params.get("continuation-token", "")).decode()
        with self.lock:
            keys = sorted(unquote(path[len("/b/"):]) for path in self.objects)
            sizes = {unquote(path[len("/b/"):]): len(data) for path, data in self.objects.items()}
        keys = [key for key in keys if key.startswith(prefix) and key > after]
        page = keys[:int(params.get("max-keys", "1000"))]
        url = params.get("encoding-type") == "url"
        entries = "".join(
            f"<Contents><Key>{escape(quote_plus(key, safe='/') if url else key)}</Key>"
            "<LastModified>2026-11-27T13:00:00.000Z</LastModified><ETag>&quot;x&quot;</ETag>"
            f"<Size>{sizes[key]}</Size><StorageClass>STANDARD</StorageClass></Contents>"
            for key in page)
        more = len(keys) > len(page)
        return ('<?xml version="1.0" encoding="UTF-8"?>'
                '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>b</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(page)}"
                f"</KeyCount>{'<EncodingType>url</EncodingType>' if url else ''}"
                f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{entries}"
                + (f"<NextContinuationToken>{page[-1].encode().hex()}</NextContinuationToken>"
                   if more else "")
                + "</ListBucketResult>").encode()

    def pool(self, size: int = 4, timeout: float = 5.0) -> UnixPool:
        pool = UnixPool(f"{'https' if self.tls else 'http'}://s3.test", size, timeout)
        pool.socket_path = self.path
        if self._trusting is not None:
            pool._context = self._trusting
        return pool

    def settings(self, directory: Path, **changes: Any) -> S3Settings:
        credentials = directory / "s3.json"
        credentials.write_text(json.dumps({"access_key": "AK", "secret_key": "SK"}))
        return S3Settings(endpoint="http://s3.test", bucket="b", prefix="p",
                          credentials_file=credentials, **changes)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
