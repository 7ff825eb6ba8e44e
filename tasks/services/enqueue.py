"""Putting a task's `run_task` job on its RQ queue (after commit), recording the job, the job's
hard timeout, and the waits before a task runs again: a retry's backoff and a capacity deferral.
Every `run_task` job goes through `task_enqueue`: on the `resume` lane when a person's action
resumes the task (`decided=True`), on its priority's queue otherwise."""

from __future__ import annotations

import os
import random
import uuid
from datetime import timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from redis import Redis

from harness_base.config import harness_config
from harness_base.queues import PRIORITY_QUEUES, RESUME_QUEUE
from tasks.models import Task
from tasks.services.task_transitions import task_transition
from tasks.states import (
    TaskStatus,
    TransitionConflict,
)


def queue_name_for(priority: str) -> str:
    return priority if priority in PRIORITY_QUEUES else "default"


# The job by dotted path: enqueueing a task never imports the agent loop, which sits above
# every app (docs/architecture.md).
RUN_TASK_JOB = "agent.jobs.run_task"


def task_enqueue(
    *, task: Task, delay_s: float | None = None, decided: bool = False, job_id: str | None = None
) -> None:
    """Put `run_task` on the task's priority queue once the surrounding transaction commits;
    with `decided` (the task resumes because a person acted on it) on the `resume` lane, which
    every worker serves first; with `delay_s`, RQ's scheduler (a worker started
    `--with-scheduler`) enqueues it then.

    `job_id`: the job's id, which the caller's transaction wrote on the task (`rq_job_id`,
    task_job_id_new) with the change that queues it: the job is enqueued under it, and not
    recorded again after the enqueue.

    A failure to reach Redis is logged, not raised: the task is durable in the database and
    the sweep re-enqueues queued tasks whose job is missing."""
    task_id = str(task.id)
    queue_name = RESUME_QUEUE if decided else queue_name_for(task.priority)
    # The lease epoch the task had when it was enqueued: the job id is recorded only if no
    # worker has taken the task since (a fenced write, like every other worker write).
    epoch = task.lease_epoch

    def send() -> None:
        queue = django_rq.get_queue(queue_name, connection=queue_connection(queue_name))
        options = {
            "job_timeout": task_job_timeout_s(task=task),
            "result_ttl": 600,
            "failure_ttl": 7 * 86400,
            "description": f"run_task {task_id}",
            **({"job_id": job_id} if job_id else {}),
        }
        if delay_s:
            # RQ's scheduler keeps whole seconds (truncated): round up, so a job never runs
            # before its time.
            at = timezone.now() + timedelta(seconds=delay_s)
            at += timedelta(microseconds=(1_000_000 - at.microsecond) % 1_000_000)
            job = queue.enqueue_at(at, RUN_TASK_JOB, task_id, **options)
        else:
            job = queue.enqueue(RUN_TASK_JOB, task_id, **options)
        if not job_id:
            task_job_record(task_id=task_id, epoch=epoch, job_id=job.id)

    transaction.on_commit(send, robust=True)


# One Redis client per process and queue: django_rq builds a new client (a new connection
# pool, so a new TCP connection and its handshake) on every get_queue, which an approval's
# enqueue paid on its path to the worker. Kept per process (a forked child opens its own) and
# for the queue's configuration as it reads now (tests point the queues at another Redis).
_CONNECTIONS: dict[str, tuple[int, str, Redis]] = {}


def queue_connection(queue_name: str) -> Redis:
    """The Redis client this process enqueues `queue_name`'s jobs with (created on first
    use, then reused: its pool reconnects after a Redis restart)."""
    config = repr(sorted(settings.RQ_QUEUES[queue_name].items()))
    pid = os.getpid()
    cached = _CONNECTIONS.get(queue_name)
    if cached is not None and cached[:2] == (pid, config):
        return cached[2]
    connection = django_rq.get_connection(queue_name)
    _CONNECTIONS[queue_name] = (pid, config, connection)
    return connection


def task_job_id_new() -> str:
    """An id for the job a transaction is about to queue, written on the task (`rq_job_id`)
    with the change that queues it; task_enqueue(job_id=...) then enqueues under it."""
    return str(uuid.uuid4())


def task_job_record(*, task_id: Any, epoch: int, job_id: str) -> bool:
    """Remember the RQ job that will run the task, fenced by the lease epoch it was enqueued
    at: False, writing nothing, when a worker took the task since (its epoch moved on)."""
    return Task.objects.filter(id=task_id, lease_epoch=epoch).update(rq_job_id=job_id) == 1


# What a job may run past its session timeout before the queue kills its work horse: a turn
# and a tool call in flight when the session ran out, the final writes, and slack.
JOB_TIMEOUT_SLACK_S = 120


def task_job_timeout_s(*, task: Task) -> int:
    """The hard, queue-level timeout of one `run_task` job: the task's session timeout plus its
    turn and tool timeouts and slack. The loop ends a run at its session timeout by itself;
    this bound holds even when the work horse is stuck where the loop cannot act (RQ's
    supervisor kills the horse; the worker then settles the task, agent/worker/)."""
    timeouts = harness_config().timeouts
    budget = (task.spec or {}).get("budget") or {}
    total = (
        (budget.get("session_timeout_s") or timeouts.session_s)
        + (budget.get("turn_timeout_s") or timeouts.turn_s)
        + (budget.get("tool_timeout_s") or timeouts.tool_s)
    )
    return int(total) + JOB_TIMEOUT_SLACK_S


def task_wake(*, task_id: Any) -> bool:
    """retry_wait -> queued once the backoff has elapsed (the scheduled job then runs it).
    False when the task is not waiting for a retry (canceled meanwhile, or already woken)."""
    try:
        task_transition(
            task_id=task_id,
            to=TaskStatus.QUEUED,
            expect_from=[TaskStatus.RETRY_WAIT],
            reason="backoff elapsed",
            fields={"retry_at": None},
        )
    except (TransitionConflict, Task.DoesNotExist):
        return False
    return True


def task_defer(*, task_id: Any, decided: bool = False) -> None:
    """Put a queued task that found no free capacity back on its queue (`decided`: the
    `resume` lane it came by) after a short, jittered delay, instead of a worker waiting for a
    slot."""
    task = Task.objects.filter(id=task_id, status=TaskStatus.QUEUED).first()
    if task is not None:
        delay = settings.HARNESS_CAPACITY_RETRY_S * (1 + random.random())
        task_enqueue(task=task, delay_s=delay, decided=decided)
