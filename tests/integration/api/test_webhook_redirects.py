"""A webhook delivery never follows a redirect: a receiver's 3xx is its answer (a failed
attempt, retried and then given up like any other), never an address to send the signed
event on to. Followed, a receiver at an allowed address could hand the event to one the
allowed networks refuse."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.redis_server import free_port
from tests.support.stack import Stack
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.ceph


class Redirector:
    """A receiver that answers every POST with `status` and a Location elsewhere."""

    def __init__(self, status: int, location: str) -> None:
        self.port = free_port()
        self.posts = 0
        redirector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                redirector.posts += 1
                self.send_response(status)
                self.send_header("Location", location)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def elsewhere() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


def _deliveries(stack: Stack, headers: dict[str, str], hook_id: str) -> list[dict[str, Any]]:
    answer = stack.get(f"/v1/webhooks/{hook_id}/deliveries", headers)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["deliveries"])


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_is_the_receivers_answer_not_an_address_to_follow(
        stack: Stack, elsewhere: Receiver, status: int) -> None:
    project = {"X-Project-Id": f"hooks-{uuid.uuid4().hex[:8]}", "X-Roles": "member"}
    redirector = Redirector(status, elsewhere.url)
    try:
        made = stack.post("/v1/webhooks", {"url": redirector.url}, project)
        assert made.status_code == 201, made.text
        hook_id = made.json()["id"]
        assert stack.post(f"/v1/webhooks/{hook_id}/test", {}, project).status_code == 202
        deadline = time.monotonic() + 60
        while not (ended := [d for d in _deliveries(stack, project, hook_id)
                             if d["status"] != "pending"]):
            assert time.monotonic() < deadline, _deliveries(stack, project, hook_id)
            time.sleep(0.2)
        [delivery] = ended
        # Every attempt got the redirect as its answer; none went where it pointed.
        assert delivery["status"] == "failed", delivery
        assert delivery["last_status_code"] == status, delivery
        assert redirector.posts == delivery["attempts"]
        assert elsewhere.received == []
    finally:
        redirector.close()
