"""A database or job queue that cannot be reached answers 503 with Retry-After and the
usual error body, not 500: the client should retry, and nothing was half-written."""

from __future__ import annotations

import uuid

import pytest
import rados
import rbd
from fastapi.testclient import TestClient

from api.main import create_app
from tests.integration.api.test_errors import error_of
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.redis_server import free_port
from tests.support.stack import HEADERS, Stack

pytestmark = pytest.mark.ceph


def test_an_unreachable_database_is_503_with_retry_after(stack: Stack) -> None:
    # A real PostgreSQL client against a port nobody listens on: connection refused.
    settings = stack.settings.model_copy(update={
        "database_url": f"postgresql+psycopg://cairn@127.0.0.1:{free_port()}/cairn"})
    with TestClient(create_app(settings)) as api:
        for response in (api.get("/v1/plans", headers=HEADERS),
                         api.get("/v1/jobs", headers=HEADERS),
                         api.post(f"/v1/jobs/{uuid.uuid4()}/cancel", headers=HEADERS)):
            err = error_of(response, 503)
            assert err["code"] == "database_unavailable"
            assert response.headers["Retry-After"] == "5"
            assert "127.0.0.1" not in err["message"]  # no connection details to callers


def test_a_backup_asked_for_while_the_queue_is_away_still_runs(
        stack: Stack, volumes_pool: rados.Ioctx) -> None:
    """The job row is the outbox: a backup accepted while Redis is unreachable is recorded
    (202, queued), and the scheduler sends it once the queue answers again."""
    name = ceph.unique_name("no-queue")
    rbd.RBD().create(volumes_pool, name, 4 * MiB)
    try:
        settings = stack.settings.model_copy(update={
            "redis_url": f"redis://127.0.0.1:{free_port()}/0"})
        with TestClient(create_app(settings)) as api:
            response = api.post("/v1/backups", json={"volume": f"ceph-a/volumes/{name}"},
                                headers=HEADERS)
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "queued"
        # The stack's own scheduler (whose Redis is up) admits and sends it.
        assert stack.wait_job(response.json()["id"])["status"] == "succeeded"
    finally:
        ceph.remove_image(volumes_pool, name)
