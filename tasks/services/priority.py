"""An operator's change of a task's priority: recorded (audited) and, for a queued task, its job
moved to the new priority's queue at once (`job_move`)."""

from __future__ import annotations

from typing import Any

import django_rq
from django.contrib.auth.models import User
from django.db import transaction
from rq.job import Job
from rq.registry import ScheduledJobRegistry

from harness_base.queues import PRIORITY_QUEUES
from tasks.models import Task
from tasks.services.audit import audit_record
from tasks.services.enqueue import queue_name_for
from tasks.services.task_transitions import task_lock
from tasks.states import TaskStatus

# Moves a job from one queue to another in one step on the Redis server, so no worker ever
# finds it on two queues or on none: taken out of the old queue's list (or its schedule),
# put at the end of the new one (or into its schedule, due when it was), its origin rewritten.
# A job no longer in the old queue (a worker popped it meanwhile) is left where it is.
_MOVE = """
local job_id, origin = ARGV[1], ARGV[2]
if redis.call('LREM', KEYS[2], 0, job_id) > 0 then
  redis.call('RPUSH', KEYS[3], job_id)
  redis.call('SADD', KEYS[6], KEYS[3])
  redis.call('HSET', KEYS[1], 'origin', origin)
  return 1
end
local due = redis.call('ZSCORE', KEYS[4], job_id)
if due then
  redis.call('ZREM', KEYS[4], job_id)
  redis.call('ZADD', KEYS[5], due, job_id)
  redis.call('HSET', KEYS[1], 'origin', origin)
  return 1
end
return 0
"""


def job_move(*, job_id: str, to: str) -> bool:
    """Move a waiting (or scheduled) RQ job to queue `to`, atomically. False when it is not
    waiting on any other harness queue (taken by a worker, ended, gone, or already there)."""
    connection = django_rq.get_connection(to)
    job = Job.fetch(job_id, connection=connection) if Job.exists(job_id, connection) else None
    if job is None or job.origin == to:
        return False
    old, new = django_rq.get_queue(job.origin), django_rq.get_queue(to)
    keys = [
        job.key,
        old.key,
        new.key,
        ScheduledJobRegistry(queue=old).key,
        ScheduledJobRegistry(queue=new).key,
        new.redis_queues_keys,
    ]
    return bool(connection.eval(_MOVE, len(keys), *keys, job_id, to) == 1)


class PriorityRefused(Exception):
    """The task's priority cannot change (it has finished)."""


def task_priority_set(*, task_id: Any, priority: str, user: User) -> Task:
    """Give a task another priority (`high`, `default` or `low`), audited as `task_priority`.
    A queued task's job moves to that priority's queue once the change commits, also from the
    `resume` lane: the operator's choice is the newer word. A finished task is refused
    (PriorityRefused): there is nothing left to order."""
    if priority not in PRIORITY_QUEUES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITY_QUEUES)}")
    with transaction.atomic():
        # The row lock orders this against a decision or a recovery enqueueing the task.
        task = task_lock(task_id=task_id)
        if task.is_terminal:
            raise PriorityRefused(f"task is {task.status}: its priority no longer matters")
        before = task.priority
        task.priority = priority
        task.save(update_fields=["priority", "updated_at"])
        audit_record(
            user=user,
            action="task_priority",
            task_id=task.id,
            before={"priority": before},
            after={"priority": priority},
        )
        if task.status == TaskStatus.QUEUED and task.rq_job_id:
            job_id, queue = task.rq_job_id, queue_name_for(priority)
            transaction.on_commit(lambda: job_move(job_id=job_id, to=queue), robust=True)
    return task
