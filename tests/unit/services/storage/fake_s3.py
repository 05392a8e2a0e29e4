"""An S3 endpoint in the test's own process, on a Unix socket (the unit tier connects to
no network address): it keeps objects in a dict (PUT, conditional with `If-None-Match: *`,
GET, HEAD, DELETE, and ListObjectsV2 of bucket `b`, paged), checks nothing of the
signature, and answers a test's scripted replies first. It counts the connections it
accepted and the most it held open at once."""

from __future__ import annotations

import http.client
import json
import socket
import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote_plus, unquote, urlsplit
from xml.sax.saxutils import escape

from services.settings import S3Settings
from services.storage.http_pool import ConnectionPool

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


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("s3.test", 80, timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class UnixPool(ConnectionPool):
    """A ConnectionPool whose connections reach the fake's socket."""

    socket_path = ""

    def _new(self) -> http.client.HTTPConnection:
        return _UnixConnection(self.socket_path, self.timeout)


class FakeS3:
    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "s3.sock")
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
        pool = UnixPool("http://s3.test", size, timeout)
        pool.socket_path = self.path
        return pool

    def settings(self, directory: Path, **changes: Any) -> S3Settings:
        credentials = directory / "s3.json"
        credentials.write_text(json.dumps({"access_key": "AK", "secret_key": "SK"}))
        return S3Settings(endpoint="http://s3.test", bucket="b", prefix="p",
                          credentials_file=credentials, **changes)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
