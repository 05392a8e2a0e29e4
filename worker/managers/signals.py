"""Signals that stop a job's work inside a worker. They are control flow, not errors a
request answers with: they carry no HTTP status and never reach the API. Each has the code
recorded on the job when it ends one."""

from __future__ import annotations

from typing import ClassVar


class JobSignal(Exception):
    code: ClassVar[str]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JobLost(JobSignal):
    """This worker no longer owns the job (it was re-queued after a missed heartbeat, or
    its row moved on): stop without cleaning up or recording anything."""

    code = "job_lost"


class JobCancelled(JobSignal):
    """A user cancelled the job: stop, and remove what it had made."""

    code = "cancelled"
