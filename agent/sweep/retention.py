"""The retention job (settings.HARNESS_RETENTION_JOB), run by the sweep when it is due."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from harness_base.config import harness_config
from tasks import services
from tasks.models import SweepRun

RETENTION_NAME = "retention"


def _due(run: SweepRun | None, key: str, every_s: float, now: Any) -> bool:
    last = run.counts.get(key) if run else None
    return last is None or now - datetime.fromisoformat(last) >= timedelta(seconds=every_s)


def sweep_retention(*, now: Any) -> dict[str, Any]:
    """Run the retention job if it is due; returns its counts ({} when it did not run). Its
    SweepRun row ("retention") keeps the job's state between runs (the finished_at cursor,
    when it and the garbage collection last ran). Lock contract: that row, select_for_update
    with skip_locked, so one sweeper runs retention at a time and the others skip it."""
    policy = harness_config().retention
    services.sweep_run_ensure(name=RETENTION_NAME, now=now)
    with transaction.atomic():
        run = services.sweep_run_lock(name=RETENTION_NAME)
        if run is None or not _due(run, "ran_at", policy.every, now):
            return {}
        collect = _due(run, "collected_at", policy.gc_every, now)
        clock = time.monotonic()
        result = import_string(settings.HARNESS_RETENTION_JOB)(
            state=run.counts, collect_garbage=collect
        )
        services.sweep_run_save(
            run=run,
            started_at=now,
            duration_ms=(time.monotonic() - clock) * 1000,
            counts={
                **result,
                "ran_at": now.isoformat(),
                "collected_at": now.isoformat() if collect else run.counts.get("collected_at"),
            },
        )
    return result
