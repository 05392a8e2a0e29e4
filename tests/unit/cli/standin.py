"""A stand-in for keystoneauth's session before Cairn's API (the requests it was sent, the
answers it gives), and `cairn ARGS` run as a shell runs it, through `cli.main.main`: its
exit code, stdout's bytes, stderr."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests
from click.testing import CliRunner

from cli.main import main

Answer = tuple[int, dict[str, str], bytes]


def answer(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return status, {"Content-Type": "application/json", **(headers or {})}, \
        json.dumps(body).encode()


def error(status: int, code: str, message: str, **headers: str) -> Answer:
    return answer(status, {"error": {"code": code, "message": message, "details": None}},
                  headers)


@dataclass
class Sent:
    method: str
    path: str
    params: dict[str, Any]
    stream: bool
    json: Any = None


@dataclass
class FakeSession:
    """Answers with what a route function returns for the parameters: the route of
    "METHOD /path" if there is one, else of "/path" (any method)."""

    routes: dict[str, Callable[[dict[str, Any]], Answer]]
    sent: list[Sent] = field(default_factory=list)

    def request(self, url: str, method: str, **kwargs: Any) -> requests.Response:
        path = url.removeprefix("http://cairn.test")
        params = dict(kwargs.get("params") or {})
        self.sent.append(Sent(method, path, params, bool(kwargs.get("stream")),
                              kwargs.get("json")))
        route = self.routes.get(f"{method} {path}") or self.routes[path]
        status, headers, body = route(params)
        response = requests.Response()
        response.status_code = status
        response.headers.update(headers)
        response.raw = io.BytesIO(body)
        return response


@dataclass
class Ran:
    code: int
    out: bytes
    err: str


def cairn(*args: str) -> Ran:
    """`cairn ARGS` as a shell runs it: the exit code, stdout's bytes, stderr."""
    runner = CliRunner()
    with runner.isolation() as (out, err, *_):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return Ran(code, out.getvalue(), err.getvalue().decode())


