"""Read-side views of the RQ queues and failed-job registries (Redis, not SQL); the workers are
tasks.selectors.workers'."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime

import django_rq
from django.conf import settings
from django.utils import timezone
from rq.job import Job

from tasks.models import Task
from tasks.selectors import job_task_id, rq_workers, worker_dead
from tasks.states import TaskStatus

FAILED_JOBS_SHOWN = 50


@dataclass(frozen=True)
class QueueInfo:
    name: str
    depth: int
    oldest_enqueued_at: datetime | None
    started: int
    scheduled: int
    failed: int


@dataclass(frozen=True)
class FailedJob:
    id: str
    queue: str
    description: str
    task_id: str | None
    ended_at: datetime | None
    error: str
    # Why a requeue would not resume the job's task ("" when it would): the page offers the
    # button only then.
    refusal: str = ""


# What a requeued `run_task` job would do to its task, by the task's status: only a queued task
# (or one whose retry is due) is taken by the job; anything else is refused, saying why.
_REFUSALS: dict[str, str] = {
    TaskStatus.WAITING_REVIEW: "its task is waiting for a decision (a review): decide it",
    TaskStatus.RUNNING: "its task is running under another job",
    TaskStatus.HELD: "its task is held: resume it from the task page",
    TaskStatus.STALLED: "its task is stalled: the sweep redispatches it",
    TaskStatus.PENDING: "its task has not been queued",
    TaskStatus.PREPARED: "its task waits for its group's checkpoint round",
}


def requeue_refusal(*, job_id: str, task: Task | None) -> str:
    """Why requeueing the failed `run_task` job `job_id` would not resume `task` ("" when it
    would): the task is in a state the job would not take (finished, waiting for a decision,
    running, held, ...), or was enqueued again since under another job (redispatched)."""
    if task is None:
        return "its task no longer exists"
    if task.is_terminal:
        return f"its task has ended ({task.status})"
    if task.status not in (TaskStatus.QUEUED, TaskStatus.RETRY_WAIT):
        return _REFUSALS.get(task.status, f"its task is {task.status}")
    if task.rq_job_id and task.rq_job_id != job_id:
        return f"its task was redispatched: job {task.rq_job_id} runs it"
    return ""


def queues_overview() -> list[QueueInfo]:
    out = []
    for name in settings.HARNESS_QUEUES:
        queue = django_rq.get_queue(name)
        first = queue.get_job_ids(0, 1)
        oldest = Job.fetch(first[0], connection=queue.connection) if first else None
        out.append(
            QueueInfo(
                name=name,
                depth=queue.count,
                oldest_enqueued_at=oldest.enqueued_at if oldest else None,
                started=queue.started_job_registry.count,
                scheduled=queue.scheduled_job_registry.count,
                failed=queue.failed_job_registry.count,
            )
        )
    return out


def failed_jobs(*, limit: int = FAILED_JOBS_SHOWN) -> list[FailedJob]:
    """The newest failed jobs across the harness queues."""
    out = []
    for name in settings.HARNESS_QUEUES:
        queue = django_rq.get_queue(name)
        ids = queue.failed_job_registry.get_job_ids(0, limit - 1)
        for job in Job.fetch_many(ids, connection=queue.connection):
            if job is None:
                continue
            result = job.latest_result()
            error = ((result.exc_string if result else "") or "").strip()
            out.append(
                FailedJob(
                    id=job.id,
                    queue=name,
                    description=job.description or job.func_name or "",
                    task_id=job_task_id(job),
                    ended_at=job.ended_at,
                    error=error.splitlines()[-1] if error else "",
                )
            )
    out.sort(key=lambda j: j.ended_at.timestamp() if j.ended_at else 0.0, reverse=True)
    out = out[:limit]
    tasks = Task.objects.in_bulk([j.task_id for j in out if j.task_id])
    return [
        replace(j, refusal=requeue_refusal(job_id=j.id, task=tasks.get(uuid.UUID(j.task_id))))
        if j.task_id
        else j
        for j in out
    ]


def queue_depths() -> dict[str, int]:
    """Jobs waiting on each harness queue (one LLEN each)."""
    return {name: django_rq.get_queue(name).count for name in settings.HARNESS_QUEUES}


def workers_per_queue() -> dict[str, int]:
    """Live workers listening on each harness queue (not the dead ones /ops/ still shows)."""
    now = timezone.now()
    counts = dict.fromkeys(settings.HARNESS_QUEUES, 0)
    for worker in rq_workers():
        if worker_dead(worker, now=now):
            continue
        for name in worker.queue_names():
            if name in counts:
                counts[name] += 1
    return counts
