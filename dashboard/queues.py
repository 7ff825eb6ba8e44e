"""Read-side views of the RQ queues, workers and failed-job registries (Redis, not SQL)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import django_rq
from django.conf import settings
from rq import Worker
from rq.job import Job

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
class WorkerInfo:
    name: str
    state: str
    queues: list[str]
    current_job_id: str | None
    current_task_id: str | None
    last_heartbeat: datetime | None
    successful: int
    failed: int


@dataclass(frozen=True)
class FailedJob:
    id: str
    queue: str
    description: str
    task_id: str | None
    ended_at: datetime | None
    error: str


def job_task_id(job: Job | None) -> str | None:
    """The task a `run_task(task_id)` job works on, if it is one."""
    if job is None:
        return None
    try:
        args = job.args
    except Exception:  # an undeserialisable job still shows up, without a task link
        return None
    if not args:
        return None
    try:
        return str(uuid.UUID(str(args[0])))
    except ValueError:
        return None


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


def workers_overview() -> list[WorkerInfo]:
    connection = django_rq.get_connection(settings.HARNESS_QUEUES[0])
    out = []
    for worker in Worker.all(connection=connection):
        job_id = worker.get_current_job_id()
        job = Job.fetch(job_id, connection=connection) if job_id else None
        out.append(
            WorkerInfo(
                name=worker.name,
                state=str(worker.get_state()),
                queues=worker.queue_names(),
                current_job_id=job_id,
                current_task_id=job_task_id(job),
                last_heartbeat=worker.last_heartbeat,
                successful=worker.successful_job_count,
                failed=worker.failed_job_count,
            )
        )
    return sorted(out, key=lambda w: w.name)


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
                    description=job.description or job.func_name,
                    task_id=job_task_id(job),
                    ended_at=job.ended_at,
                    error=error.splitlines()[-1] if error else "",
                )
            )
    out.sort(key=lambda j: j.ended_at.timestamp() if j.ended_at else 0.0, reverse=True)
    return out[:limit]


def queue_depths() -> dict[str, int]:
    """Jobs waiting on each harness queue (one LLEN each)."""
    return {name: django_rq.get_queue(name).count for name in settings.HARNESS_QUEUES}


def workers_per_queue() -> dict[str, int]:
    """Live workers listening on each harness queue (RQ drops a worker's entry when its
    heartbeat lapses)."""
    connection = django_rq.get_connection(settings.HARNESS_QUEUES[0])
    counts = dict.fromkeys(settings.HARNESS_QUEUES, 0)
    for worker in Worker.all(connection=connection):
        for name in worker.queue_names():
            if name in counts:
                counts[name] += 1
    return counts
