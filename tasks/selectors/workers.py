"""The RQ workers as /ops/ and `GET /api/v1/ops/workers` show them (Redis, plus the tasks they
run): each under its name, `host:pid`, with its state — idle, busy (with which task), or dead."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime

import django_rq
from django.conf import settings
from django.utils import timezone
from rq import Worker
from rq.job import Job
from rq.worker import BaseWorker

from harness_base.queues import redis_text
from tasks.models import Task

# Where the sweep notes, in a dead worker's own hash, when it first saw it dead.
DEAD_SINCE_FIELD = "harness_dead_since"
# Where a worker announces, in its own hash, the harness it runs (agent.worker.Worker:
# harness_base.versions.harness_version): a rolling deploy's old and new workers side by side.
VERSION_FIELD = "harness_version"
COMMIT_FIELD = "harness_commit"


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    host: str
    pid: int | None
    # idle, busy, suspended, or dead: not heard from within HARNESS_WORKER_TTL_S, or its
    # process is gone from this host.
    state: str
    queues: list[str]
    current_job_id: str | None
    current_task_id: str | None
    # The task's own record of what runs it (its work horse, `host:pid`): the task page's.
    task_worker_id: str
    last_heartbeat: datetime | None
    successful: int
    failed: int
    # The harness version (PEP 440) and commit the worker runs; "" for one that did not say.
    version: str = ""
    commit: str = ""


def worker_name() -> str:
    """This process's name as a worker: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


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


def _process_gone(host: str, pid: int | None) -> bool:
    """True when `pid` is known not to run on this host any more (gone, or a zombie waiting
    to be reaped); a process on another host is judged by its heartbeat alone."""
    if not pid or host != socket.gethostname():
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
    except (OSError, IndexError):
        return False


def worker_dead(worker: BaseWorker, *, now: datetime) -> bool:
    """Its heartbeat expired (RQ beats at least every HARNESS_WORKER_TTL_S), or its process is
    gone from this host. RQ keeps the entry until its key expires; until then it is dead."""
    if _process_gone(worker.hostname or "", worker.pid):
        return True
    if worker.last_heartbeat is None:
        return True
    return (now - worker.last_heartbeat).total_seconds() > settings.HARNESS_WORKER_TTL_S


def rq_workers() -> list[BaseWorker]:
    """Every worker registered with the harness's Redis."""
    return Worker.all(connection=django_rq.get_connection(settings.HARNESS_QUEUES[0]))


def workers_overview() -> list[WorkerInfo]:
    now = timezone.now()
    connection = django_rq.get_connection(settings.HARNESS_QUEUES[0])
    rows = []
    for worker in rq_workers():
        job_id = worker.get_current_job_id()
        job = (
            Job.fetch(job_id, connection=connection)
            if job_id and Job.exists(job_id, connection)
            else None
        )
        announced = connection.hmget(worker.key, [VERSION_FIELD, COMMIT_FIELD])
        rows.append((worker, job_id, job_task_id(job), [redis_text(v) for v in announced]))
    task_ids = [task_id for _, _, task_id, _ in rows if task_id]
    horses = dict(Task.objects.filter(id__in=task_ids).values_list("id", "worker_id"))
    out = []
    for worker, job_id, task_id, (version, commit) in rows:
        state = "dead" if worker_dead(worker, now=now) else str(worker.get_state())
        out.append(
            WorkerInfo(
                name=worker.name,
                host=worker.hostname or "",
                pid=worker.pid,
                state=state,
                queues=worker.queue_names(),
                current_job_id=job_id,
                current_task_id=task_id,
                task_worker_id=horses.get(uuid.UUID(task_id), "") if task_id else "",
                last_heartbeat=worker.last_heartbeat,
                successful=worker.successful_job_count,
                failed=worker.failed_job_count,
                version=version,
                commit=commit,
            )
        )
    return sorted(out, key=lambda w: w.name)
