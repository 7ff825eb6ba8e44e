"""The tool call's state machine: the only writer of `ToolCall.status` and the fields derived
from it (tasks.states.TOOLCALL_TRANSITIONS)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from tasks.models import TaskEvent, ToolCall
from tasks.services.leases import task_fence
from tasks.services.task_transitions import task_lock
from tasks.states import (
    TOOLCALL_SETTLED,
    IllegalTransition,
    ToolCallStatus,
    TransitionConflict,
    toolcall_can_transition,
)


class ToolCallConflict(TransitionConflict):
    """The call's row changed between reading and writing it."""


def toolcall_transition(
    *,
    call: ToolCall,
    to: str,
    fields: dict[str, Any] | None = None,
    now: datetime | None = None,
    event: TaskEvent | None = None,
    epoch: int | None = None,
    write: bool = True,
    task_locked: bool = False,
) -> ToolCall:
    """The one function that changes a tool call's status (tasks.states.TOOLCALL_TRANSITIONS).

    Checks the table, sets the status and the fields derived from it on `call` — `finished_at`
    when the call gets an outcome (unless `fields` names it), `started_at` when it starts
    running — with `fields` (its result, error, attempts…), then writes it:

    - `write=True` (reviews, the sweep, recovery): in one transaction, lock the task row (lock
      contract) — or, with `epoch`, prove the worker still holds the lease (LeaseLost) — then
      a conditional UPDATE of the changed fields on the status read (ToolCallConflict if the
      row moved meanwhile) and `event`, if given. A new (unsaved) row is inserted.
    - `write=False` (the worker's own ledger): the row is written by the worker's next
      lease-fenced write (`task_fenced_write`), in the same statement as the step's events.
      While a task runs, only its lease holder writes its calls.

    `task_locked`: the caller's transaction holds the task row's lock already (task_lock); the
    write is part of that transaction (no savepoint, no second lock).

    Raises IllegalTransition (machine "tool call")."""
    frm = call.status
    if not toolcall_can_transition(frm, to):
        raise IllegalTransition(frm, to, machine="tool call")
    now = now or timezone.now()
    updates: dict[str, Any] = {"status": to}
    if to in TOOLCALL_SETTLED:
        updates["finished_at"] = now
    elif to == ToolCallStatus.RUNNING:
        updates["started_at"] = now
    updates.update(fields or {})
    for key, value in updates.items():
        setattr(call, key, value)
    if not write:
        return call
    with transaction.atomic(savepoint=not task_locked):
        if epoch is not None:
            task_fence(task_id=call.task_id, epoch=epoch)
        elif not task_locked:
            task_lock(task_id=call.task_id)
        if call._state.adding:
            call.save(force_insert=True)
        elif ToolCall.objects.filter(pk=call.pk, status=frm).update(**updates) != 1:
            raise ToolCallConflict(f"tool call {call.call_id} changed while transitioning")
        if event is not None:
            event.save(force_insert=True)
    return call
