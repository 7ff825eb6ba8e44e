"""The job's lease: a task taken (`with_lease`, `with_lease_loaded`) and run under it, and a run
whose database connection broke waiting for the database and giving the task back."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import rq
from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connection,
    connections,
)
from rq.timeouts import JobTimeoutException

from harness_base import telemetry
from harness_base.collector import collector_for_run
from harness_base.queues import RESUME_QUEUE
from tasks import beacon, services
from tasks.models import Task
from tasks.tracing import task_segment

log = logging.getLogger(__name__)


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def with_lease_loaded(
    *, task_id: Any, load: Callable[[str], Any], name_key: str, run: Callable[[Task, str, Any], str]
) -> str:
    """with_lease for a task whose spec names operator-registered code (a graph, an SDK agent):
    the code is imported before the task is taken, since an import can take seconds, which must
    not count against the heartbeat. A load that fails here is retried by `run`, which fails
    the task naming the reason."""
    worker_id = worker_identity()
    spec = Task.objects.filter(id=task_id).values_list("spec", flat=True).first() or {}
    try:
        loaded = load(spec["agent"][name_key])
    except Exception:
        loaded = None
    return with_lease(
        task_id=task_id, worker_id=worker_id, execute=lambda task: run(task, worker_id, loaded)
    )


def with_lease(*, task_id: Any, worker_id: str, execute: Callable[[Task], str]) -> str:
    """Take the task's lease (a queued task, or one whose retry backoff has elapsed) and run
    `execute(task)`. A duplicate job exits untouched; with no free capacity the task is put
    back on its queue after a short delay. A run whose database connection broke waits for
    the database and gives the task back (`connection_lost_release`)."""
    try:
        task = _acquire(task_id=task_id, worker_id=worker_id)
    except services.CapacityFull:
        # A decided task waits out the capacity on the lane it came by.
        job = rq.get_current_job()
        services.task_defer(task_id=task_id, decided=job is not None and job.origin == RESUME_QUEUE)
        return "deferred"
    if task is None:
        log.info("task %s is not queued; nothing to do", task_id)
        return "skipped"
    with task_segment(task) as span, collector_for_run():
        try:
            outcome = execute(task)
        except Exception as exc:
            if not connection_lost(exc):
                raise
            outcome = connection_lost_release(task_id=task_id, epoch=task.lease_epoch, exc=exc)
        telemetry.set_attributes(span, {"harness.run.outcome": outcome})
        log.info("task %s: run ended: %s", task_id, outcome)
        return outcome


def _acquire(*, task_id: Any, worker_id: str) -> Task | None:
    for attempt in range(2):
        try:
            task = services.task_acquire(task_id=task_id, worker_id=worker_id)
            if task is None and services.task_wake(task_id=task_id):
                task = services.task_acquire(task_id=task_id, worker_id=worker_id)
            return task
        except (OperationalError, InterfaceError) as exc:
            # The job's first query met a connection the database dropped (it restarted since
            # the worker last used it): once it answers again, take the task as usual.
            if attempt or not connection_lost(exc) or not database_wait():
                raise
    return None


def connection_lost(exc: BaseException) -> bool:
    """The run's database connection broke (the server restarted or failed over, the network
    dropped it), as opposed to a statement the database refused."""
    if isinstance(exc, InterfaceError):
        return True
    return isinstance(exc, OperationalError) and not connection.is_usable()


def job_timed_out(exc: BaseException) -> bool:
    """The job's hard timeout (tasks.services.task_job_timeout_s) reached the run: RQ raises
    JobTimeoutException into the job's thread wherever it is, the loop or an agent's SDK. Not
    the task's own failure: agent.jobs.run_task settles the task as `timeout` (layer: job)."""
    return isinstance(exc, JobTimeoutException)


def database_wait() -> bool:
    """Wait up to HARNESS_DB_RECONNECT_S for the database to answer on a new connection,
    promising the worker (tasks.beacon) to be heard from meanwhile. -> it answers."""
    deadline = time.monotonic() + settings.HARNESS_DB_RECONNECT_S
    delay = 0.1
    while True:
        connections.close_all()
        beacon.expect("database", max(0.0, deadline - time.monotonic()) + delay)
        try:
            connection.ensure_connection()
            if connection.is_usable():
                return True
        except DatabaseError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(2 * delay, 2.0)


def connection_lost_release(*, task_id: Any, epoch: int, exc: BaseException) -> str:
    """The run lost its database connection: nothing it did since its last durable write
    counts (a call whose intent was recorded is settled by the next run like any call a worker
    died in). Once the database answers, the task is queued again under this lease and carried
    on from its newest checkpoint; if it does not answer in time, the task stays `running` and
    the sweep redispatches it once its heartbeat is stale."""
    error = f"{type(exc).__name__}: {exc}"[:500]
    log.warning("task %s: database connection lost (%s); waiting for the database", task_id, error)
    if not database_wait():
        log.error("task %s: the database did not come back; left to the sweep", task_id)
        return "connection_lost"
    released = services.task_release_lost_connection(task_id=task_id, epoch=epoch, error=error)
    return "released" if released else "lease_lost"
