"""The events Cairn counts, defined in one place so the metrics reference
(docs/operations.md) has few sources: the worker's jobs and webhook deliveries and the
API's requests here, the scheduler's loop in `services.scheduler.metrics` (only
cairn-scheduler imports it: its unlabelled series would otherwise appear, at zero, in
every process).

Labels stay bounded: kinds, outcomes, reason codes, targets, projects and plans, never a
job id (each job would be a new series). Counters and histograms survive several processes
of one kind on a host through prometheus_client's multiprocess mode
(`PROMETHEUS_MULTIPROC_DIR`, docs/operations.md)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

JOB_SECONDS_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0,
                       3600.0, 7200.0, 14400.0, 28800.0, 86400.0)
"""From a second (a small incremental) to a day (a first full of a large volume)."""

REQUEST_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                           30.0)

jobs_started = Counter(
    "cairn_jobs_started", "Jobs a worker started, retries after a lost worker included.",
    ["kind", "project", "plan"])
jobs_finished = Counter(
    "cairn_jobs_finished",
    "Jobs that ended, by outcome (succeeded, failed, cancelled) and reason (the job's "
    "error code; empty when it succeeded).",
    ["kind", "project", "plan", "outcome", "reason"])
job_seconds = Histogram(
    "cairn_job_duration_seconds", "How long jobs ran, from their start on a worker to their "
    "end.", ["kind", "outcome"], buckets=JOB_SECONDS_BUCKETS)
job_read_bytes = Counter(
    "cairn_job_read_bytes", "Bytes jobs read, by the backup target involved.",
    ["kind", "target"])
job_written_bytes = Counter(
    "cairn_job_written_bytes", "Bytes jobs wrote, by the backup target involved.",
    ["kind", "target"])
verify_results = Counter(
    "cairn_verify_results", "Verifies that ended, by result (ok, corrupt).",
    ["project", "result"])

webhook_deliveries_unsigned = Counter(
    "cairn_webhook_deliveries_unsigned",
    "Webhook deliveries a worker could not sign, by reason: key (the key their webhook's "
    "secrets are sealed under is not in the worker's key file, or they do not open) or "
    "internal. Each is tried again, then fails without counting against its webhook.",
    ["reason"])

gc_runs = Counter(
    "cairn_object_gc_runs", "Garbage collections of an object target that ended, by outcome "
    "(succeeded; skipped: never written to; failed, with the error's code as reason: the "
    "collection stopped before its sweep and nothing is freed until the cause is gone).",
    ["target", "outcome", "reason"])

api_requests = Counter(
    "cairn_api_requests", "Requests the API answered, by route template and status.",
    ["method", "route", "status"])
api_request_seconds = Histogram(
    "cairn_api_request_duration_seconds", "How long the API took to answer, by route "
    "template.", ["method", "route"], buckets=REQUEST_SECONDS_BUCKETS)


def job_started(kind: str, project: str, plan: str | None) -> None:
    jobs_started.labels(kind, project, plan or "").inc()
    # The success series exists from the start, at 0: increase() never sees a series' first
    # sample, so a first success would otherwise not count. (Failures carry a reason not
    # known yet; the rules catch a new failure series with `unless ... offset`.)
    jobs_finished.labels(kind, project, plan or "", "succeeded", "")


def job_finished(*, kind: str, project: str, plan: str | None, target: str | None,
                 outcome: str, reason: str | None, seconds: float, bytes_read: int,
                 bytes_written: int) -> None:
    jobs_finished.labels(kind, project, plan or "", outcome, reason or "").inc()
    job_seconds.labels(kind, outcome).observe(seconds)
    if bytes_read:
        job_read_bytes.labels(kind, target or "").inc(bytes_read)
    if bytes_written:
        job_written_bytes.labels(kind, target or "").inc(bytes_written)


def gc_run(target: str, outcome: str, reason: str) -> None:
    gc_runs.labels(target, outcome, reason).inc()
