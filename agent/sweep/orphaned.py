"""Queued tasks (and those past their retry time) whose RQ job is gone, ended without running
them, stuck in a schedule nobody runs, or popped by a worker that never started it: enqueued
again."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from rq.job import Job
from rq.registry import ScheduledJobRegistry
from rq.utils import as_text

from harness_base.queues import RESUME_QUEUE
from tasks import services
from tasks.events import EventType
from tasks.models import Task
from tasks.states import TaskStatus

# RQ job states after which the job will not run its task (any other state: it still may).
_ENDED_JOB_STATES = {"finished", "failed", "stopped", "canceled", "stuck", "undelivered"}
# Where a sweep notes a queued job it found in no queue list (see _undelivered).
_UNDELIVERED_KEY = "harness:undelivered:{}"


def _job_states(job_ids: list[str], *, grace_s: float) -> tuple[dict[str, str], set[str]]:
    """(RQ job id -> status, for the jobs that still exist in Redis; the ids of those on the
    `resume` lane, whose tasks go back on it). A scheduled job overdue by
    more than `grace_s` is `stuck`: no scheduler runs for its queue (the worker holding the
    scheduler lock died; the lock outlives it by a minute), so it is removed here and its task
    enqueued directly, rather than waiting for a scheduler to come back. Each job is looked
    for on the queue it was put on (its origin: the `resume` lane or its priority's queue,
    moved since by a priority change)."""
    states: dict[str, str] = {}
    by_queue: dict[str, list[str]] = {}
    connection = django_rq.get_connection(settings.HARNESS_QUEUES[0])
    for job in Job.fetch_many(job_ids, connection=connection):
        if job is not None:
            status = job.get_status(refresh=False)
            states[job.id] = status.value if status is not None else "created"
            if job.origin in settings.HARNESS_QUEUES:
                by_queue.setdefault(job.origin, []).append(job.id)
    for queue_name, ids in by_queue.items():
        queue = django_rq.get_queue(queue_name)
        scheduled = ScheduledJobRegistry(queue=queue)
        for job_id in scheduled.get_jobs_to_schedule(timestamp=int(time.time() - grace_s)):
            if job_id in states:
                scheduled.remove(job_id, delete_job=True)
                states[job_id] = "stuck"
        queued = [job_id for job_id in ids if states.get(job_id) == "queued"]
        for job_id in _undelivered(queue, queued, grace_s=grace_s):
            states[job_id] = "undelivered"
    return states, set(by_queue.get(RESUME_QUEUE, ()))


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
    job_ids = [task.rq_job_id for task in candidates if task.rq_job_id]
    states, resumed = _job_states(job_ids, grace_s=grace_s)
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
        services.task_enqueue(task=task, decided=task.rq_job_id in resumed)
        requeued += 1
    return requeued
