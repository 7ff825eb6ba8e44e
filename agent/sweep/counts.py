"""What one pass of the sweep did (SweepCounts), and its record (`sweep_record`: the sweep's
SweepRun row, shown on /ops/)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tasks import services
from tasks.models import SWEEPER_NAME


@dataclass
class SweepCounts:
    stalled: int = 0
    redispatched: int = 0
    failed: int = 0
    canceled: int = 0
    requeued: int = 0
    reviews_expired: int = 0
    notifications_enqueued: int = 0
    hours_rolled: int = 0
    review_hours_rolled: int = 0
    checkpoints_deleted: int = 0
    blobs_deleted: int = 0
    parents_woken: int = 0
    rounds_ended: int = 0
    shared_restored: int = 0
    workers_forgotten: int = 0

    def any(self) -> bool:
        return any(asdict(self).values())


def sweep_record(*, started: Any, duration_ms: float, counts: SweepCounts) -> None:
    services.sweep_run_record(
        name=SWEEPER_NAME, started_at=started, duration_ms=duration_ms, counts=asdict(counts)
    )
