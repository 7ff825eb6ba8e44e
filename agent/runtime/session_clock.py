"""The session clock of a run (`SessionClock`, re-exported by agent.runtime.run)."""

from __future__ import annotations

import time

from tasks.models import Task


class SessionClock:
    """How long a task's session has run, on the database's clock, as leases are: its age when
    this worker took the lease (`started_at` and the acquisition's `heartbeat_at`, both the
    database's time), then this host's monotonic clock. The wall clock of the worker's machine,
    which may be hours off or stepped mid-run, plays no part."""

    def __init__(self, task: Task) -> None:
        started, acquired = task.started_at, task.heartbeat_at
        self.at_acquisition_s = (
            max(0.0, (acquired - started).total_seconds()) if started and acquired else 0.0
        )
        self.acquired_mono = time.monotonic()

    def elapsed_s(self) -> float:
        return self.at_acquisition_s + time.monotonic() - self.acquired_mono
