"""The one exception hierarchy of Cairn. Each error carries its HTTP status and a stable
code; the API renders it as {"error": {"code", "message", "details"}}, and workers record
its message on the job as the reason a user can act on. (A worker's own control flow,
job lost or cancelled, is not an error of this kind: `worker/managers/signals.py`.)"""

from __future__ import annotations

from typing import Any, ClassVar


class CairnError(Exception):
    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(CairnError):
    status_code = 404
    code = "not_found"


class VolumeNotFound(NotFound):
    code = "volume_not_found"


class RestorePointNotFound(NotFound):
    code = "restore_point_not_found"


class JobNotFound(NotFound):
    code = "job_not_found"


class PlanNotFound(NotFound):
    code = "plan_not_found"


class WebhookNotFound(NotFound):
    code = "webhook_not_found"


class BadRequest(CairnError):
    status_code = 400
    code = "bad_request"


class InvalidMarker(BadRequest):
    code = "invalid_marker"


class InvalidInput(CairnError):
    status_code = 422
    code = "invalid_input"


class UnknownTarget(InvalidInput):
    code = "unknown_target"


class UnknownCluster(InvalidInput):
    code = "unknown_cluster"


class InvalidSchedule(InvalidInput):
    code = "invalid_schedule"


class InvalidRetention(InvalidInput):
    code = "invalid_retention"


class QuotaExceeded(CairnError):
    """The project would store more than its quota allows."""

    status_code = 413
    code = "quota_exceeded"


class Forbidden(CairnError):
    status_code = 403
    code = "forbidden"


class VolumeNotOwned(Forbidden):
    """A Cinder volume changed hands after the project started protecting it."""

    code = "volume_not_owned"


class Conflict(CairnError):
    status_code = 409
    code = "conflict"


class ImageExists(Conflict):
    code = "image_exists"


class RestorePointBusy(Conflict):
    code = "restore_point_busy"


class VolumeBusy(Conflict):
    code = "volume_busy"


class BackupAlreadyRunning(Conflict):
    code = "backup_already_running"


class InvalidStatusTransition(Conflict):
    code = "invalid_status"


class StorageUnavailable(CairnError):
    """A Ceph cluster could not be reached or answered with an error Cairn cannot fix."""

    status_code = 503
    code = "storage_unavailable"


class StorageTimeout(StorageUnavailable):
    """A Ceph operation did not complete within `ceph_op_timeout_seconds`."""

    code = "storage_timeout"


class TargetKeyUnavailable(StorageUnavailable):
    """An object-storage target's data key cannot be opened with the operator's key (none
    configured, or another one): nothing on that target can be read or written."""

    code = "target_key_unavailable"


class TargetNotConfigured(StorageUnavailable):
    """The restore point's target is not (any more) in this service's settings."""

    code = "target_not_configured"


class TargetNeverWritten(StorageUnavailable):
    """A chunk target (an object store, a directory) holds no data key: nothing was ever
    written there (or it points at another bucket and prefix, or directory, than the one it
    was made with)."""

    code = "target_never_written"


class TargetKeyMissing(StorageUnavailable):
    """A chunk target holds chunks or manifests but no data key, or no key where its
    recorded key was stored: a key made now could not read what is stored, so nothing is
    written there until the operator puts the key back (or points the target back at the
    bucket and prefix, or directory, it was made with)."""

    code = "target_key_missing"


class TargetKeyChanged(StorageUnavailable):
    """A chunk target's data key is not the one it should be: the target holds another
    key than Cairn's database records (nothing is read or written there), a job's key was
    replaced while it ran (what it wrote is not made available), or a restore point was
    sealed with another key than the target's now (it cannot be read, and is not
    corrupt)."""

    code = "target_key_changed"


class LeaseLost(StorageUnavailable):
    """A job's lease on an object target lapsed: a garbage collection may have run."""

    code = "target_lease_lost"


class StorageError(CairnError):
    """Ceph failed an operation; librbd's own error stays in the operator's log."""

    status_code = 502
    code = "storage_error"


class StorageFull(StorageError):
    status_code = 507
    code = "storage_full"


class DataCorrupt(CairnError):
    """Data read back does not match the checksum recorded when it was written."""

    status_code = 500
    code = "data_corrupt"


class LeaseBusy(Conflict):
    """An object target stayed held by leases that exclude the one asked for."""

    code = "target_busy"


class SnapshotsLeft(Conflict):
    """Snapshots Cairn did not remove because no row of its own owns them."""

    code = "snapshots_left"


class JobNotCancellable(Conflict):
    code = "job_not_cancellable"


class JobNotChangeable(Conflict):
    """The job's QoS cannot change: it is finished, or of a kind that runs too briefly."""

    code = "job_not_changeable"


class TooManyWebhooks(Conflict):
    code = "too_many_webhooks"


class PlanNameTaken(Conflict):
    code = "plan_name_taken"


class Unauthorized(CairnError):
    status_code = 401
    code = "unauthorized"


class TooManyRequests(CairnError):
    """The caller asks too often (portal sign-ins, unknown tokens at once); `retry_after`
    says when to try again."""

    status_code = 429
    code = "too_many_requests"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)


class ServiceUnavailable(CairnError):
    """Another OpenStack service (Keystone, Cinder) could not be reached or failed."""

    status_code = 503
    code = "service_unavailable"


class CinderError(CairnError):
    """Cinder refused or failed a request Cairn made for the user; its message is passed on."""

    status_code = 502
    code = "cinder_error"


class VolumeInUse(Conflict):
    code = "volume_in_use"


# File-level restore (issue 34, worker/files/): what a tenant's own filesystem, read from a
# restore point, can make a request end with. Each is the tenant's to act on, never a 5xx:
# the bytes are theirs, and a parser that gives up on them is doing its job.


class PathNotFound(NotFound):
    code = "path_not_found"


class FilesUnreadable(InvalidInput):
    """The restore point holds no partition or filesystem Cairn can read (unknown, damaged),
    or a file whose data it cannot give back; the message says which and why."""

    code = "files_unreadable"


class FilesEncrypted(FilesUnreadable):
    """LUKS or another encrypted volume: Cairn holds no key, so it lists nothing."""

    code = "files_encrypted"


class NotADirectory(InvalidInput):
    code = "not_a_directory"


class IsADirectory(InvalidInput):
    code = "is_a_directory"


class ParserLimitExceeded(InvalidInput):
    """The filesystem parser hit one of its limits (time, memory, entries, reply size) on
    the tenant's bytes: a damaged or crafted filesystem, or a request too big to answer."""

    code = "parser_limit_exceeded"


class RestorePointNotReadable(Conflict):
    """Files are read only from an `available` restore point: one being created holds no
    data yet, one in error or being deleted may have lost some. The message names its
    status."""

    code = "restore_point_not_readable"


class RestorePointDamaged(Conflict):
    """A block read for a file request failed its checksum or is missing: DataCorrupt,
    as the file service answers it (verify the restore point, restore another one)."""

    code = "restore_point_damaged"


class FileServiceUnavailable(ServiceUnavailable):
    """The file service (cairn-files) could not be reached or is at its capacity."""

    code = "file_service_unavailable"
