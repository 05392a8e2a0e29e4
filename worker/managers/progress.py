"""A job's reporter as the object-copy engine's progress listener."""

from __future__ import annotations

from worker.engine.copy import CopyStats
from worker.managers.reporter import JobReporter


class ReporterProgress:
    def __init__(self, reporter: JobReporter) -> None:
        self.reporter = reporter

    def begin(self, stats: CopyStats) -> None:
        self.reporter.start_copy(stats.bytes_total, stats.bytes_resumed, stats.window)

    def tick(self, stats: CopyStats) -> None:
        self.reporter.progress(stats)
