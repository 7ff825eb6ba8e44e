"""A worker's lease on a running task: the fence (lease epoch) its writes prove, its heartbeats
(the work horse's and its supervisor's), and how a lease ends without the loop (a lost database
connection, a killed work horse)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from tasks.events import EventType
from tasks.models import Task
from tasks.services.enqueue import task_enqueue
from tasks.services.events import event_record
from tasks.services.task_transitions import task_transition
from tasks.states import (
    IllegalTransition,
    LeaseLost,
    TaskStatus,
    TransitionConflict,
)


def task_fence(*, task_id: Any, epoch: int, **fields: Any) -> None:
    """Inside a transaction: prove this worker still holds the lease (and lock the row),
    updating heartbeat and any given fields. Raises LeaseLost so the transaction rolls back."""
    updated = Task.objects.filter(id=task_id, lease_epoch=epoch, status=TaskStatus.RUNNING).update(
        heartbeat_at=Now(), updated_at=timezone.now(), **fields
    )
    if updated != 1:
        raise LeaseLost(f"task {task_id}: lease epoch {epoch} lost")


def task_heartbeat(*, task_id: Any, epoch: int) -> bool:
    """The running worker's heartbeat (database time), fenced by its lease epoch: False,
    writing nothing, once the lease is lost."""
    return (
        Task.objects.filter(id=task_id, lease_epoch=epoch, status=TaskStatus.RUNNING).update(
            heartbeat_at=Now()
        )
        == 1
    )


def task_supervisor_heartbeat(*, task_id: Any, worker_id: str) -> bool:
    """Heartbeat a running task from the worker process supervising its work horse (another
    interpreter: it beats even while the horse is stuck). -> whether a cancel is pending.

    A row someone holds locked is skipped, not waited for: the holder is acting on the task
    right now, and a waiting heartbeat would queue ahead of the horse's own writes."""
    with transaction.atomic():
        row = (
            Task.objects.select_for_update(skip_locked=True)
            .filter(id=task_id, status=TaskStatus.RUNNING, worker_id=worker_id)
            .values_list("cancel_requested", flat=True)
            .first()
        )
        if row is None:
            return False
        Task.objects.filter(id=task_id).update(heartbeat_at=Now())
        return bool(row)


def _task_release(
    *, task_id: Any, epoch: int, reason: str, type: str, payload: dict[str, Any]
) -> bool:
    """Give a running task back under the caller's lease: queued (a lease that moved on
    meanwhile is left alone), the event recorded and its job enqueued, so a worker carries it
    on from its newest checkpoint at once. -> released."""
    with transaction.atomic():
        try:
            task = task_transition(
                task_id=task_id,
                to=TaskStatus.QUEUED,
                expect_epoch=epoch,
                expect_from=[TaskStatus.RUNNING],
                reason=reason,
                fields={"worker_id": ""},
            )
        except (LeaseLost, TransitionConflict):
            return False
        event_record(task_id=task_id, type=type, payload=payload, step_index=task.current_step)
        task_enqueue(task=task)
    return True


def task_release_lost_connection(*, task_id: Any, epoch: int, error: str) -> bool:
    """A worker whose database connection broke mid-run (a restart, a failover, a network cut
    that healed) gives its task back once the database answers again, instead of leaving it
    `running` until a sweeper notices the silence. -> released."""
    return _task_release(
        task_id=task_id,
        epoch=epoch,
        reason="database connection lost; carried on from the newest checkpoint",
        type=EventType.REQUEUED,
        payload={"status": TaskStatus.RUNNING, "cause": "connection_lost", "error": error},
    )


def task_release_drained(*, task_id: Any, epoch: int, worker_id: str) -> bool:
    """A run whose worker is stopping (SIGTERM: drain) gives its task back at a checkpoint,
    for another worker to continue at once rather than after the stale-heartbeat window.
    -> released."""
    return _task_release(
        task_id=task_id,
        epoch=epoch,
        reason=f"worker {worker_id} is stopping; carried on from the newest checkpoint",
        type=EventType.DRAINED,
        payload={"worker": worker_id, "killed": False},
    )


def task_settle_killed_horse(*, task_id: Any, worker_id: str, timed_out_s: float | None) -> None:
    """The work horse running the task was killed by its supervisor or died. A pending cancel
    ends the task canceled; a horse killed at the job's hard timeout (`timed_out_s`) fails it
    with error class `timeout` (layer: job). A horse that died otherwise (a crash) is left to
    the sweep, which redispatches the task."""
    task = Task.objects.filter(id=task_id, status=TaskStatus.RUNNING, worker_id=worker_id).first()
    if task is None:
        return
    if task.cancel_requested:
        to, error_class = TaskStatus.CANCELED, "canceled"
        message = "canceled; the work horse did not stop by itself and was killed"
    elif timed_out_s is not None:
        to, error_class = TaskStatus.FAILED, "timeout"
        message = (
            f"the job exceeded its hard timeout of {timed_out_s:g}s and was killed (layer: job)"
        )
    else:
        return
    try:
        task_transition(
            task_id=task_id,
            to=to,
            expect_epoch=task.lease_epoch,
            expect_from=[TaskStatus.RUNNING],
            reason=message,
            fields={"error_class": error_class, "error_message": message},
        )
    except (LeaseLost, TransitionConflict, IllegalTransition):
        pass
