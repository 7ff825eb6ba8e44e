"""Where a task's RQ job is (Redis, not SQL): the queue ("lane") a queued task waits on and how
many jobs are ahead of it there, or the worker that runs it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import django_rq
from django.conf import settings
from rq.job import Job
from rq.registry import ScheduledJobRegistry

from harness_base.queues import redis_text
from tasks.models import Task
from tasks.states import TaskStatus


@dataclass(frozen=True)
class LanePlace:
    queue: str
    # Jobs a worker takes before this one on its queue (None: not on the queue's list, e.g.
    # scheduled for later, or taken by a worker a moment ago).
    ahead: int | None = None
    # Set when the job waits in the queue's schedule (a retry's backoff, a capacity deferral).
    scheduled_for: datetime | None = None
    # The RQ worker running the job (its name, `host:pid`, as /ops/ lists it), once taken.
    worker: str = ""


def task_lane_place(*, task: Task) -> LanePlace | None:
    """Where the job of a queued or running task is; None for a task in another status, with
    no job recorded, or whose job is gone (the sweep enqueues it again)."""
    if task.status not in (TaskStatus.QUEUED, TaskStatus.RUNNING) or not task.rq_job_id:
        return None
    connection = django_rq.get_connection(settings.HARNESS_QUEUES[0])
    try:
        origin, worker = connection.hmget(Job.key_for(task.rq_job_id), ["origin", "worker_name"])
    except Exception:  # Redis unreachable: the page still renders, without the place
        return None
    queue_name = redis_text(origin)
    if queue_name not in settings.HARNESS_QUEUES:
        return None
    if task.status == TaskStatus.RUNNING:
        return LanePlace(queue=queue_name, worker=redis_text(worker))
    queue = django_rq.get_queue(queue_name)
    ahead = connection.lpos(queue.key, task.rq_job_id)
    if isinstance(ahead, int):  # LPOS without COUNT: the index, or None
        return LanePlace(queue=queue_name, ahead=ahead)
    due = connection.zscore(ScheduledJobRegistry(queue=queue).key, task.rq_job_id)
    return LanePlace(
        queue=queue_name,
        scheduled_for=datetime.fromtimestamp(due, tz=UTC) if due is not None else None,
    )
