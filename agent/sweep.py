"""The sweep (`manage.py harness_sweep`): the database is the source of truth, so whatever a
crash or a Redis restart left behind is repaired from it.

1. A running task whose heartbeat is older than HARNESS_STALE_AFTER_S (database clock) lost its
   worker: it becomes `stalled`, then is redispatched (queued, forward recovery from its newest
   valid checkpoint) at most HARNESS_MAX_REDISPATCHES times, then fails (`stalled`). A cancel
   requested before the worker died is honoured instead.
2. A queued task (or one whose retry backoff is past) whose RQ job is gone — Redis restarted or
   was flushed, or the job died before it acquired the task — is enqueued again.
3. Overdue reviews expire (`review.services.reviews_expire_overdue`); notifications that came
   due (reminders, escalations, retries) or whose job was lost are handed to RQ
   (`review.notifications.notifications_enqueue_due`).
4. Finished hours of tool calls are rolled up for the statistics (`tasks.rollups`).
5. Every `retention.every` (harness.yaml), retention thins the checkpoints of the tasks that
   finished since its last run, and every `retention.gc_every` it collects unreferenced blobs
   (the job named by settings.HARNESS_RETENTION_JOB, `checkpoints.retention.retention_run`).
6. Multi-agent groups: a parent waiting for children that have all ended is woken (a child
   canceled on its own, or whose end was not reported); open global checkpoint rounds are
   advanced (committed when complete, aborted past their deadline); a group rollback's restore
   of the shared directory that a crash or an I/O error interrupted is finished.

Every step is safe to run concurrently from several sweepers and to repeat: transitions are
row-locked and conditional, and a duplicate job finds its task taken and exits.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.module_loading import import_string
from rq.job import Job
from rq.registry import ScheduledJobRegistry
from rq.utils import as_text

from harness_base.config import harness_config
from harness_base.metrics import REDISPATCHES, SWEEPS, metric_inc
from multiagent.coordinator import rounds_advance_open
from multiagent.delegation import delegations_wake_ready
from multiagent.recovery import shared_restores_finish_pending
from review.notifications import notifications_enqueue_due
from review.rollups import review_rollups_advance
from review.services.expiry import reviews_expire_overdue
from tasks import services
from tasks.events import EventType
from tasks.models import SWEEPER_NAME, SweepRun, Task, ToolCall, ToolCallStatus
from tasks.rollups import rollups_advance
from tasks.states import TaskStatus

log = logging.getLogger(__name__)

# RQ job states after which the job will not run its task (any other state: it still may).
_ENDED_JOB_STATES = {"finished", "failed", "stopped", "canceled", "stuck", "undelivered"}
# Where a sweep notes a queued job it found in no queue list (see _undelivered).
_UNDELIVERED_KEY = "harness:undelivered:{}"


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

    def any(self) -> bool:
        return any(asdict(self).values())


def task_recover_stalled(
    *, task_id: Any, stale_after_s: float, max_redispatches: int, worker_id: str | None = None
) -> str:
    """Stall a running task whose heartbeat is stale, then redispatch, cancel or fail it.
    Returns what happened: "redispatched", "failed", "canceled" or "" (it was not stale after
    all, or another sweeper holds it). With `worker_id`, only while that worker holds the task:
    a worker recovering the task of the horse it killed must not take it from the worker that
    holds it now (it was stalled and redispatched while this one was frozen or cut off)."""
    held = {"worker_id": worker_id} if worker_id is not None else {}
    with transaction.atomic():
        # Lock contract: the task row, re-checked under the lock (it may have heartbeated since
        # it was listed); skip_locked leaves a row another sweeper is handling to that sweeper.
        task = (
            Task.objects.select_for_update(skip_locked=True)
            .filter(
                id=task_id,
                status=TaskStatus.RUNNING,
                heartbeat_at__lt=Now() - timedelta(seconds=stale_after_s),
                **held,
            )
            .first()
        )
        if task is None:
            return ""
        silent_s = (timezone.now() - task.heartbeat_at).total_seconds()
        services.task_transition(
            task_id=task.id,
            to=TaskStatus.STALLED,
            reason=f"no heartbeat for {silent_s:.1f}s from worker {task.worker_id or '?'}",
            fields={"worker_id": ""},
            payload={
                "worker": task.worker_id,
                "heartbeat_at": task.heartbeat_at.isoformat(),
                "epoch": task.lease_epoch,
            },
        )
        if task.cancel_requested:
            services.task_transition(
                task_id=task.id,
                to=TaskStatus.CANCELED,
                reason="canceled by operator (worker lost)",
                fields={"error_class": "canceled"},
            )
            return "canceled"
        if task.redispatch_count >= max_redispatches:
            message = (
                f"worker lost {task.redispatch_count + 1} times "
                f"(max redispatches: {max_redispatches})"
            )
            # Nobody will finish these calls: whether they took effect is unknown.
            for row in ToolCall.objects.filter(task_id=task.id, status=ToolCallStatus.RUNNING):
                services.toolcall_transition(
                    call=row,
                    to=ToolCallStatus.UNKNOWN_OUTCOME,
                    fields={
                        "error_class": "unknown_outcome",
                        "error_message": "the task failed while this call was running",
                    },
                )
            services.task_transition(
                task_id=task.id,
                to=TaskStatus.FAILED,
                reason=message,
                fields={"error_class": "stalled", "error_message": message},
            )
            return "failed"
        task = services.task_transition(
            task_id=task.id,
            to=TaskStatus.QUEUED,
            reason=f"redispatch {task.redispatch_count + 1} of {max_redispatches}",
            fields={"redispatch_count": task.redispatch_count + 1},
        )
        services.event_record(
            task_id=task.id,
            type=EventType.REDISPATCHED,
            payload={"redispatch": task.redispatch_count, "max": max_redispatches},
            step_index=task.current_step,
        )
        services.task_enqueue(task=task)
        return "redispatched"


def tasks_recover_stalled(
    *, stale_after_s: float, max_redispatches: int, counts: SweepCounts
) -> None:
    stale_ids = list(
        Task.objects.filter(
            status=TaskStatus.RUNNING, heartbeat_at__lt=Now() - timedelta(seconds=stale_after_s)
        ).values_list("id", flat=True)[:500]
    )
    for task_id in stale_ids:
        outcome = task_recover_stalled(
            task_id=task_id, stale_after_s=stale_after_s, max_redispatches=max_redispatches
        )
        if outcome:
            metric_inc(REDISPATCHES, outcome=outcome)
            counts.stalled += 1
            setattr(counts, outcome, getattr(counts, outcome) + 1)


def _job_states(job_ids_by_queue: dict[str, list[str]], *, grace_s: float) -> dict[str, str]:
    """RQ job id -> status, for the jobs that still exist in Redis. A scheduled job overdue by
    more than `grace_s` is `stuck`: no scheduler runs for its queue (the worker holding the
    scheduler lock died; the lock outlives it by a minute), so it is removed here and its task
    enqueued directly, rather than waiting for a scheduler to come back."""
    states: dict[str, str] = {}
    for queue_name, job_ids in job_ids_by_queue.items():
        queue = django_rq.get_queue(queue_name)
        for job in Job.fetch_many(job_ids, connection=queue.connection):
            if job is not None:
                status = job.get_status(refresh=False)
                states[job.id] = status.value if status is not None else "created"
        scheduled = ScheduledJobRegistry(queue=queue)
        for job_id in scheduled.get_jobs_to_schedule(timestamp=int(time.time() - grace_s)):
            if job_id in states:
                scheduled.remove(job_id, delete_job=True)
                states[job_id] = "stuck"
        queued = [job_id for job_id in job_ids if states.get(job_id) == "queued"]
        for job_id in _undelivered(queue, queued, grace_s=grace_s):
            states[job_id] = "undelivered"
    return states


def _undelivered(queue: Any, job_ids: list[str], *, grace_s: float) -> list[str]:
    """The jobs among `job_ids` (all `queued` in Redis) that are in no queue list, and were in
    none already at a sweep `grace_s` or more ago: a worker popped them and never started them.

    RQ hands a job to a worker blocked in BLPOP by writing the reply to its connection; when
    that worker's host was cut off, frozen or died without closing the connection, Redis takes
    the job as delivered and it is in no list any more, while its status still says `queued`.
    Nothing would run its task until that host came back, if ever. A live worker starts a
    popped job within milliseconds (its status is `started` then), so one seen undelivered on
    two sweeps `grace_s` apart is enqueued again; should the first worker come back, its job
    finds the task taken and exits. The first sighting is stamped with Redis's clock, which
    every sweeper shares (their own clocks may disagree)."""
    if not job_ids:
        return []
    connection = queue.connection
    listed = {as_text(job_id) for job_id in connection.lrange(queue.key, 0, -1)}
    missing = [job_id for job_id in job_ids if job_id not in listed]
    if not missing:
        return []
    seconds, micros = connection.time()
    now = seconds + micros / 1e6
    pipe = connection.pipeline()
    for job_id in missing:
        # Kept long enough to outlive any grace; gone on its own once the task moved on.
        pipe.set(_UNDELIVERED_KEY.format(job_id), now, nx=True, ex=max(3600, int(grace_s * 10)))
        pipe.get(_UNDELIVERED_KEY.format(job_id))
    replies = pipe.execute()
    return [
        job_id
        for job_id, created, seen in zip(missing, replies[0::2], replies[1::2], strict=True)
        if not created and seen is not None and now - float(seen) >= grace_s
    ]


def tasks_requeue_orphaned(*, grace_s: float) -> int:
    """Enqueue again the queued tasks (and those past their retry time) whose job is missing
    from Redis, ended without running them, or is stuck in a schedule nobody runs. A task
    queued less than `grace_s` ago is left alone: its job may still be on its way (it is sent
    after the commit)."""
    cutoff = timezone.now() - timedelta(seconds=grace_s)
    candidates = list(
        Task.objects.filter(
            Q(status=TaskStatus.QUEUED, updated_at__lt=cutoff)
            | Q(status=TaskStatus.RETRY_WAIT, retry_at__lt=cutoff)
        ).only("id", "priority", "rq_job_id", "status")[:1000]
    )
    by_queue: dict[str, list[str]] = {}
    for task in candidates:
        if task.rq_job_id:
            by_queue.setdefault(services.queue_name_for(task.priority), []).append(task.rq_job_id)
    states = _job_states(by_queue, grace_s=grace_s)
    requeued = 0
    for task in candidates:
        state = states.get(task.rq_job_id)
        if state is not None and state not in _ENDED_JOB_STATES:
            continue
        # A duplicate is harmless: only one job can acquire the task; the others exit.
        services.event_record(
            task_id=task.id,
            type=EventType.REQUEUED,
            payload={
                "status": task.status,
                "job_id": task.rq_job_id,
                "job_state": state or "missing",
            },
        )
        services.task_enqueue(task=task)
        requeued += 1
    return requeued


def sweep_record(*, started: Any, duration_ms: float, counts: SweepCounts) -> None:
    services.sweep_run_record(
        name=SWEEPER_NAME, started_at=started, duration_ms=duration_ms, counts=asdict(counts)
    )


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
    counts.rounds_ended = rounds_advance_open()
    counts.parents_woken = delegations_wake_ready()
    sweep_record(started=started, duration_ms=(time.monotonic() - clock) * 1000, counts=counts)
    metric_inc(SWEEPS)
    if counts.any():
        log.info("sweep: %s", asdict(counts))
    return counts
