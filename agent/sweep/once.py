"""One pass of the sweep (`sweep_once`): every step below, in order, then its record."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict

from django.conf import settings
from django.utils import timezone

from agent.sweep.counts import SweepCounts, sweep_record
from agent.sweep.orphaned import tasks_requeue_orphaned
from agent.sweep.retention import sweep_retention
from agent.sweep.stalled import tasks_recover_stalled
from harness_base.metrics import SWEEPS, metric_inc
from multiagent.coordinator import rounds_advance_open
from multiagent.delegation import delegations_wake_ready
from multiagent.recovery import shared_restores_finish_pending
from review.notifications import notifications_enqueue_due
from review.rollups import review_rollups_advance
from review.services.expiry import reviews_expire_overdue
from tasks.rollups import rollups_advance
from tasks.services import workers_dead_forget

log = logging.getLogger(__name__)


def sweep_once() -> SweepCounts:
    """One pass of the sweep; safe to run from several processes at once."""
    started = timezone.now()
    clock = time.monotonic()
    counts = SweepCounts()
    tasks_recover_stalled(
        stale_after_s=settings.HARNESS_STALE_AFTER_S,
        max_redispatches=settings.HARNESS_MAX_REDISPATCHES,
        counts=counts,
    )
    counts.shared_restored = shared_restores_finish_pending()
    counts.requeued = tasks_requeue_orphaned(grace_s=settings.HARNESS_REQUEUE_GRACE_S)
    counts.reviews_expired = reviews_expire_overdue()
    counts.notifications_enqueued = notifications_enqueue_due()
    counts.hours_rolled = rollups_advance(now=started)
    counts.review_hours_rolled = review_rollups_advance(now=started)
    retention = sweep_retention(now=started)
    counts.checkpoints_deleted = retention.get("checkpoints_deleted", 0)
    counts.blobs_deleted = retention.get("blobs_deleted", 0)
    counts.workers_forgotten = workers_dead_forget()
    counts.rounds_ended = rounds_advance_open()
    counts.parents_woken = delegations_wake_ready()
    sweep_record(started=started, duration_ms=(time.monotonic() - clock) * 1000, counts=counts)
    metric_inc(SWEEPS)
    if counts.any():
        log.info("sweep: %s", asdict(counts))
    return counts
