"""The sweepers' `SweepRun` rows (the sweep's, retention's): one row per job, overwritten by each
run."""

from __future__ import annotations

import socket
from datetime import datetime
from typing import Any

from django.db.models import F
from django.utils import timezone

from tasks.models import SweepRun


def sweep_run_record(
    *, name: str, started_at: datetime, duration_ms: float, counts: dict[str, Any]
) -> None:
    """Overwrite the sweeper's row with this run (one UPDATE; the row is created on the first
    run)."""
    values = {
        "started_at": started_at,
        "finished_at": timezone.now(),
        "duration_ms": duration_ms,
        "counts": counts,
        "host": socket.gethostname(),
    }
    if not SweepRun.objects.filter(name=name).update(runs=F("runs") + 1, **values):
        SweepRun.objects.get_or_create(name=name, defaults={**values, "runs": 1})


def sweep_run_ensure(*, name: str, now: datetime) -> None:
    """Create the job's row if it has none yet (it is then locked by `sweep_run_lock`)."""
    SweepRun.objects.get_or_create(name=name, defaults={"started_at": now, "finished_at": now})


def sweep_run_lock(*, name: str, wait: bool = False) -> SweepRun | None:
    """Inside a transaction: the job's row, locked; None while another sweeper holds it (or,
    with `wait`, once it let go)."""
    return SweepRun.objects.select_for_update(skip_locked=not wait).filter(name=name).first()


def sweep_run_claim(*, run: SweepRun, counts: dict[str, Any]) -> None:
    """Mark the job taken on its locked row (`counts` say since and until when), so that the
    job itself runs after the row's lock is let go and the other sweepers skip it meanwhile."""
    run.counts = counts
    run.save(update_fields=["counts"])


def sweep_run_save(
    *, run: SweepRun, started_at: datetime, duration_ms: float, counts: dict[str, Any]
) -> None:
    """Record a run of the job on its locked row (`sweep_run_lock`)."""
    run.counts = counts
    run.started_at = started_at
    run.finished_at = timezone.now()
    run.duration_ms = duration_ms
    run.runs += 1
    run.host = socket.gethostname()
    run.save(update_fields=["counts", "started_at", "finished_at", "duration_ms", "runs", "host"])
