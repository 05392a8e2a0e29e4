"""The metadata a restore leaves on the image it writes: which job wrote it (so a retry
knows its own image, and a cleanup never removes one that is not the job's) and how far a
copy got."""

JOB_KEY = "cairn.restore_job"
RESTORE_POINT_KEY = "cairn.restore_point"
CHECKPOINT_KEY = "cairn.restore_checkpoint"
"""The object index before which a copy restore is complete."""
