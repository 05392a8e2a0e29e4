"""Instant restores, the parts the API and the workers share: the name of a clone while it
waits for Cinder to adopt it (it leads back to its job), and why a restore point that
backs an unflattened clone cannot be deleted, in words that say until when."""

from __future__ import annotations

from services.records.jobs import Job

IMAGE_PREFIX = "cairn-instant-"


def instant_image_name(job_id: str) -> str:
    return f"{IMAGE_PREFIX}{job_id}"


def pinned_by_instant_restore(rp_id: str, job: Job) -> str:
    """Why `rp_id` cannot go while the instant restore `job` runs, and until when."""
    made = (f"Cinder volume {job.restore_cinder_volume_id}" if job.restore_cinder_volume_id
            else f"image {job.restore_target}")
    if job.ready_at is None:
        return (f"restore point {rp_id} is being restored instantly into {made} by job "
                f"{job.id}; it can be deleted once that job's flatten has finished")
    left = ""
    if job.bytes_total:
        percent = 100.0 * job.bytes_done / job.bytes_total
        left = f" ({percent:.0f} % done"
        if job.rate_bytes_per_second:
            seconds = (job.bytes_total - job.bytes_done) / job.rate_bytes_per_second
            left += f", about {_duration(seconds)} left"
        left += ")"
    return (f"restore point {rp_id} backs {made}, which instant restore job {job.id} made: "
            f"the volume reads its unchanged data from this restore point until the job has "
            f"flattened it{left}. Delete the restore point after the job finishes")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
