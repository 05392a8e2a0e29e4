"""The file service's HTTP app: only cairn-api's token and a project get in, errors in
Cairn's envelope, downloads with their status and headers, archives streamed."""

from __future__ import annotations

import io
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.unit.worker.files.fakes import FakeCalls, FakeFs, FakePoints
from worker.files.app import create_app
from worker.files.open_points import Opened
from worker.files.service import FileLimits, FileService

TOKEN = "t" * 40
RP = "3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41"
BASE = f"/internal/v1/restore-points/{RP}"
AUTH = {"Authorization": f"Bearer {TOKEN}", "X-Cairn-Project": "demo"}


@pytest.fixture
def fs() -> FakeFs:
    tree = FakeFs()
    tree.add("/etc", "dir")
    tree.add("/etc/nginx.conf", "file", data=b"events {}\n" * 1000)
    tree.add("/etc/motd", "file", data=b"hello\n")
    return tree


@pytest.fixture
def client(fs: FakeFs) -> Iterator[TestClient]:
    service = FileService(FakePoints(fs), FileLimits(sessions=4, per_project=2))
    with TestClient(create_app(service, TOKEN)) as test_client:
        yield test_client


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": f"Bearer {TOKEN}x"}, {"X-Cairn-Project": "demo"}])
def test_without_the_token_nothing_is_answered(client: TestClient,
                                               headers: dict[str, str]) -> None:
    for url in (f"{BASE}/partitions", f"{BASE}/files/content?path=/etc/motd",
                f"/internal/v1/file-versions?path=/etc/motd&restore_point={RP}"):
        answer = client.get(url, headers={"X-Cairn-Project": "demo", **headers})
        assert answer.status_code == 401, url
        assert answer.json()["error"]["code"] == "unauthorized"
        assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert client.get("/healthz").json()["status"] == "ok"


def test_the_project_is_required(client: TestClient) -> None:
    answer = client.get(f"{BASE}/partitions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 400
    assert "X-Cairn-Project" in answer.json()["error"]["message"]


def test_reads_and_errors_in_the_house_envelope(client: TestClient) -> None:
    assert client.get(f"{BASE}/partitions", headers=AUTH).json()["partitions"][0][
        "filesystem"] == "ext4"
    listing = client.get(f"{BASE}/files?path=/etc", headers=AUTH).json()
    assert [e["name"] for e in listing["entries"]] == ["motd", "nginx.conf"]
    assert client.get(f"{BASE}/files/stat?path=/etc/motd", headers=AUTH).json()["size"] == 6
    missing = client.get(f"{BASE}/files/stat?path=/etc/none", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json() == {"error": {"code": "path_not_found",
                                        "message": "/etc/none not found",
                                        "details": {"path": "/etc/none"}}}
    for bad in ("path=etc", "path=/a%00b", f"path=/{'x' * 4096}", "path=/&limit=0",
                "path=/&partition=-1"):
        answer = client.get(f"{BASE}/files?{bad}", headers=AUTH)
        assert answer.status_code == 422, bad
        assert answer.json()["error"]["code"] in ("invalid_input", "invalid_request")
    assert client.get("/internal/v1/restore-points/nope/partitions",
                      headers=AUTH).status_code == 422


def test_a_download_whole_in_part_and_past_its_end(client: TestClient, fs: FakeFs) -> None:
    data = fs.data("/etc/nginx.conf")
    whole = client.get(f"{BASE}/files/content?path=/etc/nginx.conf", headers=AUTH)
    assert whole.status_code == 200
    assert whole.content == data
    assert whole.headers["content-length"] == str(len(data))
    assert whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["content-disposition"] == (
        "attachment; filename=\"nginx.conf\"; filename*=UTF-8''nginx.conf")
    part = client.get(f"{BASE}/files/content?path=/etc/nginx.conf",
                      headers={**AUTH, "Range": "bytes=10-19"})
    assert part.status_code == 206
    assert part.content == data[10:20]
    assert part.headers["content-range"] == f"bytes 10-19/{len(data)}"
    past = client.get(f"{BASE}/files/content?path=/etc/nginx.conf",
                      headers={**AUTH, "Range": f"bytes={len(data)}-"})
    assert past.status_code == 416
    assert past.headers["content-range"] == f"bytes */{len(data)}"
    assert past.json()["error"]["code"] == "range_not_satisfiable"
    directory = client.get(f"{BASE}/files/content?path=/etc", headers=AUTH)
    assert directory.status_code == 422
    assert directory.json()["error"]["code"] == "is_a_directory"


def test_archives_stream_as_tar_and_zip(client: TestClient, fs: FakeFs) -> None:
    tar = client.get(f"{BASE}/files/archive?path=/etc&format=tar", headers=AUTH)
    assert tar.status_code == 200
    assert tar.headers["content-type"] == "application/x-tar"
    assert "content-length" not in tar.headers
    assert tar.headers["content-disposition"].endswith("filename*=UTF-8''etc.tar")
    with tarfile.open(fileobj=io.BytesIO(tar.content)) as archive:
        motd = archive.extractfile("etc/motd")
        assert motd is not None
        assert motd.read() == b"hello\n"
    zipped = client.get(f"{BASE}/files/archive?path=/etc/motd&path=/etc/nginx.conf"
                        "&format=zip", headers=AUTH)
    with zipfile.ZipFile(io.BytesIO(zipped.content)) as archive_:
        assert sorted(archive_.namelist()) == ["motd", "nginx.conf"]
        assert archive_.read("nginx.conf") == fs.data("/etc/nginx.conf")
    assert client.get(f"{BASE}/files/archive?path=/etc&format=rar",
                      headers=AUTH).status_code == 422


def test_versions_take_at_most_sixty_restore_points(client: TestClient) -> None:
    ids = "&".join(f"restore_point={RP}" for _ in range(61))
    assert client.get(f"/internal/v1/file-versions?path=/etc/motd&{ids}",
                      headers=AUTH).status_code == 422
    found = client.get(f"/internal/v1/file-versions?path=/etc/motd&restore_point={RP}",
                       headers=AUTH).json()
    assert found["versions"][0]["present"] is True
    assert found["versions"][0]["sha256"] is not None


def test_what_the_public_routes_accept_the_file_service_accepts(client: TestClient) -> None:
    # The most paths and the highest partition the API lets through: never a 422 behind it.
    from services.files import bounds
    from worker.files.parser import paths

    assert paths.MAX_PATH_BYTES == bounds.MAX_PATH_BYTES  # the parser may not import it
    many = "&".join(["path=/etc/motd"] * bounds.MAX_ARCHIVE_PATHS)
    answer = client.get(f"{BASE}/files/archive?{many}", headers=AUTH)
    assert answer.status_code == 200
    answer = client.get(f"{BASE}/files?path=/&partition={bounds.MAX_PARTITION}", headers=AUTH)
    assert answer.status_code == 200
    assert client.get(f"{BASE}/files?path=/&limit={bounds.MAX_PAGE + 1}",
                      headers=AUTH).status_code == 422


class _Held(FakeCalls):
    """A stat that waits until the test lets it go: a slow restore point."""

    started = threading.Semaphore(0)
    go = threading.Event()

    def stat(self, partition: int | None, path: str) -> dict[str, Any]:
        _Held.started.release()
        _Held.go.wait(10)
        return super().stat(partition, path)


def test_the_health_check_answers_while_every_file_thread_is_busy(fs: FakeFs) -> None:
    points = FakePoints(fs)
    opened = points.open
    def open_held(restore_point_id: str) -> Opened:
        return Opened(opened(restore_point_id).reader, _Held(fs))

    points.open = open_held  # type: ignore[method-assign]
    # 18 restore points: the file calls' 40 threads, as many as anyio's default pool has.
    service = FileService(points, FileLimits(sessions=18, per_project=2))
    busy = 2 * 18 + 4
    with TestClient(create_app(service, TOKEN)) as test_client:
        def stat(project: int) -> None:
            test_client.get(f"{BASE}/files/stat?path=/etc/motd",
                            headers={**AUTH, "X-Cairn-Project": f"p{project}"})

        callers = [threading.Thread(target=stat, args=(n,)) for n in range(busy)]
        for caller in callers:
            caller.start()
        try:
            for _ in range(busy):
                assert _Held.started.acquire(timeout=10)
            answered: list[int] = []
            health = threading.Thread(
                target=lambda: answered.append(test_client.get("/healthz").status_code))
            health.start()
            health.join(2)
            assert answered == [200]
        finally:
            _Held.go.set()
            for caller in callers:
                caller.join(10)
