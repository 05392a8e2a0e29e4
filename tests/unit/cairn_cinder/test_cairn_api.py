"""Cairn's Cinder backup driver's talk with Cairn (cairn_cinder/cairn_api.py, standard
library only: tested here in Cairn's virtualenv; the Cinder glue, cairn_cinder/backup.py,
imports Cinder and is tested by tests/integration/openstack/test_cinder_backup_driver.py).
Cairn's API is faked by its answers."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from cairn_cinder import cairn_api
from cairn_cinder.cairn_api import CairnClient, CairnFailure


class FakeCairn:
    """Answers in order, each (method, path) -> (status, JSON); records the requests."""

    def __init__(self, *answers: tuple[str, str, int, Any]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str, dict[str, Any] | None]] = []

    def __call__(self, method: str, path: str, body: dict[str, Any] | None = None
                 ) -> tuple[int, Any]:
        self.asked.append((method, path, body))
        want_method, want_path, status, answer = self.answers.pop(0)
        assert (method, path) == (want_method, want_path)
        return status, answer


def client(fake: FakeCairn) -> CairnClient:
    return CairnClient(fake, poll_seconds=0, sleep=lambda _s: None)


def job(status: str, **more: Any) -> dict[str, Any]:
    return {"id": "job-1", "status": status, **more}


def test_a_backup_waits_for_its_job_and_names_the_restore_point() -> None:
    fake = FakeCairn(("POST", "/v1/backups", 202, job("queued")),
                     ("GET", "/v1/jobs/job-1", 200, job("running")),
                     ("GET", "/v1/jobs/job-1", 200,
                      job("succeeded", restore_point_id="rp-1")))
    assert client(fake).backup("vol-1", "incremental", "local") == "rp-1"
    assert fake.asked[0][2] == {"volume": "vol-1", "kind": "incremental", "target": "local"}


def test_cairns_refusal_is_the_reason_cinder_gives_the_tenant() -> None:
    """A refusal (here Cairn's quota) surfaces with Cairn's own words."""
    fake = FakeCairn(("POST", "/v1/backups", 413, {"error": {
        "code": "quota_exceeded", "message": "project p may keep 0 restore points"}}))
    with pytest.raises(CairnFailure, match="Cairn refused to back up volume vol-1: "
                                           "project p may keep 0 restore points"):
        client(fake).backup("vol-1", "full", None)
    assert fake.asked[0][2] == {"volume": "vol-1", "kind": "full"}


def test_a_failed_job_is_a_failure_with_the_jobs_reason() -> None:
    fake = FakeCairn(("POST", "/v1/backups", 202, job("failed", error={
        "code": "target_unavailable", "message": "backup target 'local' is unreachable"})))
    with pytest.raises(CairnFailure, match=r"job job-1 failed.*'local' is unreachable"):
        client(fake).backup("vol-1", "full", None)


def test_a_job_past_the_timeout_fails_and_says_it_goes_on_in_cairn() -> None:
    now = iter([0.0, 0.0, 100.0])
    fake = FakeCairn(("POST", "/v1/backups", 202, job("running")),
                     ("GET", "/v1/jobs/job-1", 200, job("running")))
    slow = CairnClient(fake, poll_seconds=0, timeout_seconds=60, sleep=lambda _s: None,
                       clock=lambda: next(now))
    with pytest.raises(CairnFailure, match="still running after 60 s; it goes on in Cairn"):
        slow.backup("vol-1", "full", None)


def test_the_first_looks_at_a_job_come_soon_and_the_pauses_grow_to_the_interval() -> None:
    """A job of seconds is seen finished within a fraction of its run, not a whole poll
    interval later (cinder-backup holds an operation, and the tenant waits, until then)."""
    pauses: list[float] = []
    running = [("GET", "/v1/jobs/job-1", 200, job("running"))] * 8
    fake = FakeCairn(("POST", "/v1/backups", 202, job("queued")), *running,
                     ("GET", "/v1/jobs/job-1", 200, job("succeeded", restore_point_id="rp")))
    CairnClient(fake, poll_seconds=2.0, sleep=pauses.append).backup("vol-1", "full", None)
    assert pauses[0] == pytest.approx(0.2)
    assert all(b == pytest.approx(min(a * 1.5, 2.0)) for a, b in itertools.pairwise(pauses))
    assert pauses[-1] == 2.0


def test_a_restore_asks_for_the_volume_cinder_holds() -> None:
    fake = FakeCairn(("POST", "/v1/restore-points/rp-1/restore", 202, job("succeeded")))
    client(fake).restore("rp-1", "vol-2")
    assert fake.asked[0][2] == {"volume_id": "vol-2", "cinder_backup": True}


def test_a_restore_point_already_gone_from_cairn_lets_cinder_delete_its_record() -> None:
    fake = FakeCairn(("DELETE", "/v1/restore-points/rp-1", 404, {"error": {
        "code": "not_found", "message": "restore point rp-1 not found"}}))
    assert client(fake).delete("rp-1") is False


def test_a_delete_waits_for_cairns_delete_job() -> None:
    fake = FakeCairn(("DELETE", "/v1/restore-points/rp-1", 202, job("queued")),
                     ("GET", "/v1/jobs/job-1", 200, job("succeeded")))
    assert client(fake).delete("rp-1") is True
    fake = FakeCairn(("DELETE", "/v1/restore-points/rp-1", 409, {"error": {
        "code": "restore_point_busy", "message": "restore point rp-1 is being restored"}}))
    with pytest.raises(CairnFailure, match="is being restored"):
        client(fake).delete("rp-1")


@pytest.mark.parametrize(("rp", "error"), [
    ({"project_id": "other", "status": "available"}, "is project other's, not p's"),
    ({"project_id": "p", "status": "deleting"}, "is deleting, not available"),
])
def test_an_import_needs_an_available_restore_point_of_the_importing_project(
        rp: dict[str, Any], error: str) -> None:
    fake = FakeCairn(("GET", "/v1/restore-points/rp-1", 200, rp))
    with pytest.raises(CairnFailure, match=error):
        client(fake).importable("rp-1", "p")


def test_service_metadata_names_the_restore_point_and_the_kind() -> None:
    metadata = cairn_api.service_metadata("rp-1", cairn_api.kind_of("parent-backup"), None)
    assert cairn_api.restore_point_of(metadata, "b-1") == "rp-1"
    assert '"kind": "incremental"' in metadata
    assert cairn_api.kind_of(None) == "full"
    for foreign in (None, "", '{"base": "volume-1.backup.base"}', "[]"):
        with pytest.raises(CairnFailure, match="names no Cairn restore point"):
            cairn_api.restore_point_of(foreign, "b-1")
