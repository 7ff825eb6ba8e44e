"""Task events: building, recording and inserting the immutable rows of a task's history
(their types are tasks.events.EventType)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.utils import timezone

from tasks.models import Task, TaskEvent
from tasks.states import (
    TaskStatus,
)
from tasks.tracing import event_traced


def event_build(
    *,
    task_id: Any,
    type: str,
    payload: dict[str, Any] | None = None,
    step_index: int | None = None,
    actor: str = "",
    at: datetime | None = None,
) -> TaskEvent:
    """An unsaved event. `type` is one of EventType (tasks.events; tests/test_architecture.py
    checks every writer passes one)."""
    event = TaskEvent(
        task_id=task_id,
        type=type,
        payload=payload or {},
        step_index=step_index,
        actor=actor,
        created_at=at or timezone.now(),
    )
    event_traced(event)
    return event


def event_record(
    *,
    task_id: Any,
    type: str,
    payload: dict[str, Any] | None = None,
    step_index: int | None = None,
    actor: str = "",
) -> TaskEvent:
    event = event_build(
        task_id=task_id, type=type, payload=payload, step_index=step_index, actor=actor
    )
    event.save(force_insert=True)
    return event


def event_record_while_held(
    *, task_id: Any, worker_id: str, type: str, payload: dict[str, Any]
) -> bool:
    """Record an event from the worker process supervising a task, only while the task is
    running under that worker (-> whether it was recorded). No row lock is taken: the horse
    being reported on may be stuck holding one."""
    held = Task.objects.filter(id=task_id, status=TaskStatus.RUNNING, worker_id=worker_id)
    if not held.exists():
        return False
    event_record(task_id=task_id, type=type, payload=payload)
    return True


def events_record(events: Iterable[TaskEvent]) -> None:
    TaskEvent.objects.bulk_create(list(events))


def event_insert(event: TaskEvent) -> TaskEvent:
    """Insert an event built by `event_build`, in the caller's transaction."""
    event.save(force_insert=True)
    return event
