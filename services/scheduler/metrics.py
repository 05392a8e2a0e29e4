"""What cairn-scheduler tells Prometheus: its loop and the backup targets' health. Imported
by cairn-scheduler alone, so no other process exports these series (at zero)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

TICK_SECONDS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

tick_seconds = Histogram(
    "cairn_scheduler_tick_seconds", "How long one round of the scheduler's loop took.",
    buckets=TICK_SECONDS_BUCKETS)
last_tick = Gauge(
    "cairn_scheduler_last_tick_timestamp_seconds",
    "When the scheduler last finished a round of its loop (Unix time).",
    multiprocess_mode="max")
step_failures = Counter(
    "cairn_scheduler_step_failures", "Steps of the scheduler's loop that failed (retried the "
    "next round).", ["step"])
target_up = Gauge(
    "cairn_target_up", "Whether the scheduler's last probe reached the backup target (1) or "
    "not (0): an RBD target's pool, an object target's bucket, a directory target's "
    "directory (0 too when it holds data but no data key, another key than Cairn's "
    "database records, or none where its key was stored).", ["target"],
    multiprocess_mode="min")
