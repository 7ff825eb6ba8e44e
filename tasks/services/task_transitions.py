"""The task's state machine: the only writers of `Task.status` and the fields derived from it.
`task_transition` moves a task under its row lock (`task_lock`, the lock order every service
follows); `task_acquire` is a worker's queued -> running, a conditional UPDATE under the
concurrency limit that bumps the lease epoch (tasks.states holds the table both check)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from harness_base.metrics import TASKS_FINISHED, TASKS_STARTED, metric_inc
from tasks.errors import error_fingerprint
from tasks.events import EventType
from tasks.models import Task, TaskEvent, ToolCall
from tasks.rollups import calls_failed_q, rollups_task_reopened
from tasks.rollups.queries import PLANNED
from tasks.services.events import event_build, event_record
from tasks.states import (
    TERMINAL,
    IllegalTransition,
    LeaseLost,
    TaskStatus,
    TransitionConflict,
    can_transition,
)


class CapacityFull(Exception):
    """`max_concurrent_tasks` tasks are already running; the task stays queued."""


def task_lock(*, task_id: Any) -> Task:
    """Inside a transaction: lock and return the task row. Lock contract: services that also
    lock rows of other apps (reviews, checkpoints) take the task row first, the order
    task_transition and the worker's fenced writes use, so they cannot deadlock."""
    return Task.objects.select_for_update().get(id=task_id)


# Time a task spends waiting for a human (a review, a hold, or an operator to recover a stopped
# task) does not count against its session timeout.
_HUMAN_WAIT = frozenset(
    {TaskStatus.WAITING_REVIEW, TaskStatus.HELD, TaskStatus.COMPENSATION_FAILED, *TERMINAL}
)


def _seconds_in_status(*, task_id: Any, now: datetime) -> float:
    """Seconds since the task entered its current status (its newest `status` event)."""
    entered = (
        TaskEvent.objects.filter(task_id=task_id, type=EventType.STATUS)
        .order_by("-id")
        .values_list("created_at", flat=True)
        .first()
    )
    return max(0.0, (now - entered).total_seconds()) if entered else 0.0


# Fields only the state machine sets, from the status a task moves to (callers may pass the
# error class and message of a failure; the fingerprint always follows from them).
_DERIVED = frozenset(
    {
        "status",
        "error_fingerprint",
        "finished_at",
        "started_at",
        "review_wait_s",
        "held_wait_s",
        "calls_failed",
        "lease_epoch",
    }
)


def task_transition(
    *,
    task_id: Any,
    to: str,
    reason: str = "",
    actor: str = "",
    expect_epoch: int | None = None,
    expect_from: Iterable[str] | None = None,
    fields: dict[str, Any] | None = None,
    payload: dict[str, Any] | None = None,
    stay: bool = False,
    locked: Task | None = None,
) -> Task:
    """The one function that changes a task's status.

    Locks the row, checks the transition table (and, for workers, the lease epoch), applies a
    conditional UPDATE on the status it read and records an immutable `status` event, all in
    one transaction. Raises IllegalTransition, TransitionConflict or LeaseLost.

    The fields derived from the status are set here and nowhere else: `finished_at` and
    `started_at`, the time waited for a human (`review_wait_s`, `held_wait_s`), whether a tool
    call had failed by the time it finished (`calls_failed`), and the error fingerprint of the
    error class and message a caller passes in `fields` (clearing them clears it too).

    `stay=True` with `to` the task's current status changes only `fields` (a recovery that
    leaves a held task held): no status event, the derived fields still follow.

    `locked`: the row as the caller's transaction locked it (task_lock) and has not changed it
    since; the transition is then part of that transaction (no savepoint, no second lock: a
    failure rolls the caller's transaction back)."""
    with transaction.atomic(savepoint=locked is None):
        # Lock contract: the task row is locked first, before any checkpoint/review row.
        task = locked if locked is not None else Task.objects.select_for_update().get(id=task_id)
        frm = task.status
        if expect_epoch is not None and task.lease_epoch != expect_epoch:
            raise LeaseLost(f"task {task_id}: lease epoch {expect_epoch} is stale")
        if expect_from is not None and frm not in set(expect_from):
            raise TransitionConflict(f"task {task_id} is {frm}, expected {sorted(expect_from)}")
        staying = stay and to == frm
        if not staying and not can_transition(frm, to):
            raise IllegalTransition(frm, to)
        derived = _DERIVED.intersection(fields or {})
        if derived:
            raise ValueError(f"task_transition derives {sorted(derived)} itself")
        now = timezone.now()
        updates: dict[str, Any] = {"status": to, "updated_at": now, **(fields or {})}
        if not staying:
            for key, value in _derived_fields(task=task, frm=frm, to=to, now=now).items():
                updates.setdefault(key, value)
        if "error_class" in updates or "error_message" in updates:
            updates["error_fingerprint"] = error_fingerprint(
                updates.get("error_class", task.error_class),
                updates.get("error_message", task.error_message),
            )
        if Task.objects.filter(id=task_id, status=frm).update(**updates) != 1:
            raise TransitionConflict(f"task {task_id} changed while transitioning")
        if frm in TERMINAL and not staying and task.finished_at is not None:
            # The statistics' roll-up of the hour it finished in no longer holds.
            rollups_task_reopened(finished_at=task.finished_at)
        if not staying:
            _count_transition(to=to, first_start=task.started_at is None)
            event_record(
                task_id=task_id,
                type=EventType.STATUS,
                payload={"from": frm, "to": to, "reason": reason, **(payload or {})},
                step_index=task.current_step,
                actor=actor,
            )
        for key, value in updates.items():
            setattr(task, key, value)
        return task


def task_requeue_decided_build(
    *, task: Task, reason: str, actor: str, entered: datetime | None
) -> tuple[list[str], TaskEvent]:
    """waiting_review -> queued, as task_transition moves a task whose last review was
    decided, for a caller that writes it with the decision's other rows in one statement
    (review.services.approve_plain, tasks.services.locked_write): sets the status and its
    derived fields on `task` and -> (the fields to save, the unsaved `status` event). The
    caller's transaction holds the row's lock (task_lock) and has not changed it since;
    `entered`: when the task started waiting (its newest `status` event)."""
    frm, to = task.status, TaskStatus.QUEUED
    if frm != TaskStatus.WAITING_REVIEW:
        raise TransitionConflict(f"task {task.id} is {frm}, expected waiting_review")
    now = timezone.now()
    updates: dict[str, Any] = {"status": to, "updated_at": now}
    updates.update(_derived_fields(task=task, frm=frm, to=to, now=now, entered=entered))
    _count_transition(to=to, first_start=task.started_at is None)
    for key, value in updates.items():
        setattr(task, key, value)
    event = event_build(
        task_id=task.id,
        type=EventType.STATUS,
        payload={"from": frm, "to": to, "reason": reason},
        step_index=task.current_step,
        actor=actor,
    )
    return list(updates), event


def _count_transition(*, to: str, first_start: bool) -> None:
    """The metrics of a status change (harness_base.metrics), counted once it commits."""
    if to == TaskStatus.RUNNING and first_start:
        transaction.on_commit(lambda: metric_inc(TASKS_STARTED))
    elif to in TERMINAL:
        transaction.on_commit(lambda: metric_inc(TASKS_FINISHED, outcome=to))


def _derived_fields(
    *, task: Task, frm: str, to: str, now: datetime, entered: datetime | None = None
) -> dict[str, Any]:
    """What entering `to` from `frm` sets besides the status (task_transition only).
    `entered`: when the task entered `frm` (its newest `status` event), if the caller read it
    already."""
    updates: dict[str, Any] = {}
    if to in TERMINAL:
        updates["finished_at"] = now
        updates["cancel_requested"] = False
        updates["calls_failed"] = (
            ToolCall.objects.filter(task_id=task.id)
            .filter(calls_failed_q())
            .exclude(plan_mark=PLANNED)  # a plan's dry run: no tool's outcome
            .exists()
        )
    if to == TaskStatus.RUNNING and task.started_at is None:
        updates["started_at"] = now
    if to == TaskStatus.QUEUED:
        updates["finished_at"] = None
    if frm in _HUMAN_WAIT:
        # Counted when the wait ends, whatever comes next (a review rolled back to a hold
        # still waited for its review); review time and held time kept apart: a task held
        # (or stopped) and resumed never waited for a review.
        wait = "review_wait_s" if frm == TaskStatus.WAITING_REVIEW else "held_wait_s"
        waited = (
            _seconds_in_status(task_id=task.id, now=now)
            if entered is None
            else max(0.0, (now - entered).total_seconds())
        )
        updates[wait] = getattr(task, wait) + waited
    return updates
