"""Where a queued task waits: the queue ("lane") its job is on and how many jobs are ahead of it
there (Redis, not SQL)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import django_rq
from django.conf import settings
from rq.job import Job
from rq.registry import ScheduledJobRegistry

from tasks.models import Task
from tasks.states import TaskStatus


@dataclass(frozen=True)
class LanePlace:
    queue: str
    # Jobs a worker takes before this one on its queue (None: not on the queue's list, e.g.
    # scheduled for later, or taken by a worker a moment ago).
    ahead: int | None
    # Set when the job waits in the queue's schedule (a retry's backoff, a capacity deferral).
    scheduled_for: datetime | None = None


def task_lane_place(*, task: Task) -> LanePlace | None:
    """The lane of a queued task's job and its place there; None when the task is not queued,
    has no job recorded, or its job is gone (the sweep enqueues it again)."""
    if task.status != TaskStatus.QUEUED or not task.rq_job_id:
        return None
    connection = django_rq.get_connection(settings.HARNESS_QUEUES[0])
    try:
        origin = connection.hget(Job.key_for(task.rq_job_id), "origin")
    except Exception:  # Redis unreachable: the page still renders, without the place
        return None
    queue_name = origin.decode() if origin else ""
    if queue_name not in settings.HARNESS_QUEUES:
        return None
    queue = django_rq.get_queue(queue_name)
    ahead = connection.lpos(queue.key, task.rq_job_id)
    if ahead is not None:
        return LanePlace(queue=queue_name, ahead=int(ahead))
    due = connection.zscore(ScheduledJobRegistry(queue=queue).key, task.rq_job_id)
    return LanePlace(
        queue=queue_name,
        ahead=None,
        scheduled_for=datetime.fromtimestamp(due, tz=UTC) if due is not None else None,
    )
