"""What Cairn's Cinder backup driver asks of Cairn's REST API, and how it reads the answers:
the standard library only, so that it is tested in Cairn's virtualenv (tests/unit/
cairn_cinder/) while `backup.py`, which imports Cinder, runs only inside cinder-backup.

Every call is made by one `Call` (the driver's keystoneauth1 session, with the service
token of the cloud's administrator; a fake in the tests). A refusal or a failed job becomes
`CairnFailure`, whose message is Cairn's own reason, which Cinder puts in the backup's
`fail_reason` for the tenant."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

FINISHED = ("succeeded", "failed", "cancelled", "skipped")
METADATA_KEY = "cairn"
"""`backup.service_metadata` is JSON: {"cairn": {"restore_point_id", "kind", "target"}}."""


class CairnFailure(Exception):
    """Cairn refused or failed: the message is Cairn's reason, said to the tenant."""


class Call(Protocol):
    def __call__(self, method: str, path: str, body: dict[str, Any] | None = None
                 ) -> tuple[int, Any]:
        """One request to Cairn's API: its status code and its JSON answer (None if none)."""
        ...


def reason_of(status: int, answer: Any) -> str:
    """Cairn's error envelope ({"error": {"code", "message"}}) as one line."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        return str(answer["error"].get("message") or answer["error"].get("code"))
    return f"Cairn answered HTTP {status}"


def kind_of(parent_id: str | None) -> str:
    """Cinder's incremental (a parent chosen by Cinder's API) is Cairn's: what changed since
    the volume's newest restore point on the target, which Cairn chains itself (a full
    copy when there is none, and the restore point's `full_reason` says so)."""
    return "incremental" if parent_id else "full"


def service_metadata(restore_point_id: str, kind: str, target: str | None) -> str:
    return json.dumps({METADATA_KEY: {"restore_point_id": restore_point_id, "kind": kind,
                                      "target": target}}, sort_keys=True)


def restore_point_of(metadata: str | None, backup_id: str) -> str:
    """The restore point a backup's `service_metadata` names."""
    try:
        found = json.loads(metadata or "")[METADATA_KEY]["restore_point_id"]
    except (ValueError, TypeError, KeyError):
        found = None
    if not isinstance(found, str) or not found:
        raise CairnFailure(f"backup {backup_id} names no Cairn restore point (its "
                           "service_metadata is not Cairn's driver's): was it made by "
                           "another backup driver?")
    return found


FIRST_LOOK_SECONDS = 0.2


@dataclass
class CairnClient:
    call: Call
    poll_seconds: float = 2.0
    """The longest pause between two looks at a job; the first looks come sooner."""
    timeout_seconds: float = 86400.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def _expect(self, wanted: int, method: str, path: str, body: dict[str, Any] | None,
                doing: str) -> Any:
        status, answer = self.call(method, path, body)
        if status != wanted:
            raise CairnFailure(f"Cairn refused to {doing}: {reason_of(status, answer)}")
        return answer

    def wait(self, job: dict[str, Any], doing: str) -> dict[str, Any]:
        """The job once finished; CairnFailure with its reason unless it succeeded."""
        deadline = self.clock() + self.timeout_seconds
        # Most jobs take seconds: a first look after 2 s would hold cinder-backup's
        # operation (and the tenant) a second longer on average than the job itself.
        # Pauses start short and grow by half each time up to poll_seconds, so a look
        # lags the job's end by at most half its run (and 0.2 s).
        pause = min(FIRST_LOOK_SECONDS, self.poll_seconds)
        while job["status"] not in FINISHED:
            if self.clock() > deadline:
                raise CairnFailure(f"Cairn's job {job['id']} to {doing} is still "
                                   f"{job['status']} after {self.timeout_seconds:.0f} s; it "
                                   "goes on in Cairn (GET /v1/jobs/" + job["id"] + ")")
            self.sleep(pause)
            pause = min(pause * 1.5, self.poll_seconds)
            job = self._expect(200, "GET", f"/v1/jobs/{job['id']}", None,
                               f"report on job {job['id']}")
        if job["status"] != "succeeded":
            error = job.get("error") or {}
            raise CairnFailure(f"Cairn could not {doing} (job {job['id']} {job['status']}): "
                               f"{error.get('message') or error.get('code') or 'no reason'}")
        return job

    def backup(self, volume_id: str, kind: str, target: str | None) -> str:
        """Back the Cinder volume up now; the restore point's id once it is available."""
        body: dict[str, Any] = {"volume": volume_id, "kind": kind}
        if target:
            body["target"] = target
        doing = f"back up volume {volume_id}"
        job = self._expect(202, "POST", "/v1/backups", body, doing)
        return str(self.wait(job, doing)["restore_point_id"])

    def restore(self, restore_point_id: str, volume_id: str) -> None:
        """Write the restore point over the volume Cinder's backup service holds for it."""
        doing = f"restore restore point {restore_point_id} onto volume {volume_id}"
        job = self._expect(202, "POST", f"/v1/restore-points/{restore_point_id}/restore",
                           {"volume_id": volume_id, "cinder_backup": True}, doing)
        self.wait(job, doing)

    def delete(self, restore_point_id: str) -> bool:
        """Delete the restore point; False when Cairn no longer has it (deleted through
        Cairn's API or portal, or by a plan's retention): the Cinder record may go."""
        doing = f"delete restore point {restore_point_id}"
        status, answer = self.call("DELETE", f"/v1/restore-points/{restore_point_id}", None)
        if status == 404:
            return False
        if status != 202:
            raise CairnFailure(f"Cairn refused to {doing}: {reason_of(status, answer)}")
        self.wait(answer, doing)
        return True

    def restore_point(self, restore_point_id: str) -> dict[str, Any]:
        answer = self._expect(200, "GET", f"/v1/restore-points/{restore_point_id}", None,
                              f"show restore point {restore_point_id}")
        return dict(answer)

    def importable(self, restore_point_id: str, project_id: str) -> dict[str, Any]:
        """The restore point an imported Cinder backup record names, if it may be imported
        into `project_id`: available, and that project's (Cairn restores a restore point
        over volumes of its own project only)."""
        rp = self.restore_point(restore_point_id)
        if rp.get("project_id") != project_id:
            raise CairnFailure(
                f"Cairn's restore point {restore_point_id} is project {rp.get('project_id')}'s"
                f", not {project_id}'s: import the backup record in the project that owns "
                "it (openstack --os-project-id ... volume backup import)")
        if rp.get("status") != "available":
            raise CairnFailure(f"Cairn's restore point {restore_point_id} is "
                               f"{rp.get('status')}, not available")
        return rp
