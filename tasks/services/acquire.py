"""A worker takes a task: `task_acquire`, queued -> running, the state machine's one transition
taken without a row lock (tasks.states holds the table task_transition checks too). On the path
of every pick-up, after an approval too: measured by bench/approval/ (pickup)."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from harness_base.config import harness_config
from tasks.events import EventType
from tasks.models import Task, TaskEvent
from tasks.services.events import event_record
from tasks.services.task_transitions import CapacityFull, _count_transition
from tasks.states import TaskStatus, can_transition
from tasks.tracing import event_traced

# Any constant works: every acquisition under a concurrency limit takes this one lock.
_CAPACITY_LOCK_KEY = 0x6861726E657373  # "harness"


def _lock_capacity() -> None:
    """Serialise acquisitions while a global limit applies, for the rest of the transaction.
    PostgreSQL: a transaction-scoped advisory lock (held by whichever worker, on any machine,
    is acquiring). SQLite: transactions are IMMEDIATE, so writers are serialised already."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CAPACITY_LOCK_KEY])


def task_acquire(*, task_id: Any, worker_id: str) -> Task | None:
    """queued -> running for this worker: the state machine's one transition a worker takes
    without a row lock — a conditional UPDATE on `queued` (the table's own check) that bumps
    the lease epoch (the fencing token), with its `status` event in the same transaction.
    Returns None when the task is not queued (a duplicate job, or already taken); raises
    CapacityFull, changing nothing, when `max_concurrent_tasks` are already running."""
    limit = harness_config().max_concurrent_tasks
    now = timezone.now()
    frm, to = TaskStatus.QUEUED, TaskStatus.RUNNING
    assert can_transition(frm, to)
    if limit is None and connection.vendor == "postgresql":
        return _acquire_one_statement(task_id=task_id, worker_id=worker_id, now=now)
    with transaction.atomic():
        if limit is not None:
            _lock_capacity()
        # A task held by a global checkpoint round (multiagent.coordinator) is not taken: the
        # round enqueues it again when it ends.
        updated = Task.objects.filter(id=task_id, status=frm, hold_round_id__isnull=True).update(
            status=to,
            lease_epoch=F("lease_epoch") + 1,
            attempt=F("attempt") + 1,
            worker_id=worker_id,
            # Database time: the sweep compares heartbeats with the database clock, so the
            # clocks of the worker machines do not matter.
            heartbeat_at=Now(),
            # _derived_fields' rule for running, without reading the row first.
            started_at=Coalesce(F("started_at"), Now()),
            updated_at=now,
        )
        if updated != 1:
            return None
        # Counted after the update (so it includes this task) and under the lock: rolling
        # back undoes the update, leaving the task queued.
        if limit is not None and Task.objects.filter(status=TaskStatus.RUNNING).count() > limit:
            raise CapacityFull(f"{limit} tasks are already running")
        task = Task.objects.get(id=task_id)
        # Coalesce kept an earlier start: this is the task's first when it set the
        # transaction's time, which the heartbeat got too.
        _count_transition(to=to, first_start=task.started_at == task.heartbeat_at)
        event_record(
            task_id=task_id,
            type=EventType.STATUS,
            payload={
                "from": frm,
                "to": to,
                "reason": "acquired",
                "worker": worker_id,
                "epoch": task.lease_epoch,
            },
            step_index=task.current_step,
        )
    return task


def _acquire_one_statement(*, task_id: Any, worker_id: str, now: Any) -> Task | None:
    """task_acquire without a concurrency limit, on PostgreSQL: the conditional UPDATE (as
    task_acquire's), its `status` event and the row read back as one statement, its own
    transaction: one round trip instead of five."""
    frm, to = TaskStatus.QUEUED, TaskStatus.RUNNING
    pk = Task._meta.pk
    assert pk is not None
    rows = list(
        Task.objects.raw(
            _acquire_sql(),
            [to, worker_id, now, pk.get_db_prep_value(task_id, connection), frm]
            + [EventType.STATUS.value, frm, "acquired", now],
        )
    )
    if not rows:
        return None
    task = rows[0]
    # Coalesce kept an earlier start: this is the task's first when it set the statement's
    # time, which the heartbeat got too.
    _count_transition(to=to, first_start=task.started_at == task.heartbeat_at)
    payload = {"from": frm, "to": to, "reason": "acquired", "worker": worker_id}
    event_traced(
        TaskEvent(
            task_id=task.id,
            type=EventType.STATUS,
            payload={**payload, "epoch": task.lease_epoch},
            step_index=task.current_step,
            created_at=now,
        )
    )
    return task


@functools.cache
def _acquire_sql() -> str:
    qn = connection.ops.quote_name
    tasks, events = qn(Task._meta.db_table), qn(TaskEvent._meta.db_table)
    # Database time for the heartbeat and the start (see task_acquire); the event's payload
    # as task_acquire's: from, to, reason, worker, epoch.
    return (
        f"WITH t AS (UPDATE {tasks} SET status = %s, lease_epoch = lease_epoch + 1, "
        "attempt = attempt + 1, worker_id = %s, heartbeat_at = STATEMENT_TIMESTAMP(), "
        "started_at = COALESCE(started_at, STATEMENT_TIMESTAMP()), updated_at = %s "
        "WHERE id = %s AND status = %s AND hold_round_id IS NULL RETURNING *), "
        f"e AS (INSERT INTO {events} (task_id, type, payload, step_index, actor, created_at) "
        "SELECT id, %s, jsonb_build_object('from', %s::text, 'to', status, 'reason', "
        "%s::text, 'worker', worker_id, 'epoch', lease_epoch), current_step, '', %s FROM t) "
        "SELECT * FROM t"
    )
