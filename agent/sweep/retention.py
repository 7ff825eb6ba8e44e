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
# How long a sweeper holds the job it claimed; its steps are bounded (MAX_TASKS_PER_RUN, ...).
CLAIM_S = 900.0


def _due(run: SweepRun | None, key: str, every_s: float, now: Any) -> bool:
    last = run.counts.get(key) if run else None
    return last is None or now - datetime.fromisoformat(last) >= timedelta(seconds=every_s)


def _claimed(run: SweepRun, now: Any) -> bool:
    until = run.counts.get("claimed_until")
    return until is not None and now < datetime.fromisoformat(until)


def sweep_retention(*, now: Any) -> dict[str, Any]:
    """Run the retention job if it is due; returns its counts ({} when it did not run). Its
    SweepRun row ("retention") keeps the job's state between runs (the finished_at cursor,
    when it and the garbage collection last ran).

    Lock contract: the row, select_for_update with skip_locked, only to claim the job (its
    counts say it ran now and is taken for CLAIM_S) and then to record its result: the job
    runs between the two with no lock held, each of its steps in its own transaction. Held
    through the job, the row's transaction kept the checkpoints the blob count had locked
    until the thinning after it locked a task row: the reverse of the task-row-first order of
    a rollback, which deadlocked with it. The other sweepers skip the job while it is taken;
    a sweeper that dies with it lets it go when CLAIM_S has passed."""
    policy = harness_config().retention
    services.sweep_run_ensure(name=RETENTION_NAME, now=now)
    with transaction.atomic():
        run = services.sweep_run_lock(name=RETENTION_NAME)
        if run is None or _claimed(run, now) or not _due(run, "ran_at", policy.every, now):
            return {}
        state = dict(run.counts)
        claimed_until = now + timedelta(seconds=CLAIM_S)
        services.sweep_run_claim(
            run=run,
            counts={**state, "ran_at": now.isoformat(), "claimed_until": claimed_until.isoformat()},
        )
    collect = _due(run, "collected_at", policy.gc_every, now)
    clock = time.monotonic()
    result = import_string(settings.HARNESS_RETENTION_JOB)(state=state, collect_garbage=collect)
    with transaction.atomic():
        run = services.sweep_run_lock(name=RETENTION_NAME, wait=True)
        assert run is not None  # made by sweep_run_ensure; never deleted
        services.sweep_run_save(
            run=run,
            started_at=now,
            duration_ms=(time.monotonic() - clock) * 1000,
            counts={
                **result,
                "ran_at": now.isoformat(),
                "collected_at": now.isoformat() if collect else state.get("collected_at"),
            },
        )
    return result
