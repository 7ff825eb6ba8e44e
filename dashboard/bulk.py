"""Per-task actions that operators apply to many tasks at once (the task list's bulk
actions, the failure groups' "retry all in this group")."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User

from checkpoints.recovery import RecoveryConflict, RecoveryInvalid, task_cancel, task_retry
from tasks.models import Task
from tasks.states import IllegalTransition, TransitionConflict

BulkAction = Callable[..., Any]  # f(*, task_id, user, reason)

BULK_ACTIONS: dict[str, BulkAction] = {
    "cancel": task_cancel,
    # Re-runs each task's failed step from its step checkpoint (checkpoints.recovery).
    "retry": task_retry,
}
# What a per-task action raises when that one task cannot take it right now.
SKIPPABLE: tuple[type[Exception], ...] = (
    TransitionConflict,
    IllegalTransition,
    Task.DoesNotExist,
    RecoveryConflict,
    RecoveryInvalid,
)


@dataclass
class BulkOutcome:
    done: list[Any] = field(default_factory=list)
    skipped: list[tuple[Any, str]] = field(default_factory=list)


def tasks_apply(
    *, task_ids: Iterable[Any], action: BulkAction, user: User, reason: str = ""
) -> BulkOutcome:
    """Apply `action` to each task in its own transaction (the action's own): a task that
    changed meanwhile is skipped with the reason and the others go on."""
    outcome = BulkOutcome()
    for task_id in task_ids:
        try:
            action(task_id=task_id, user=user, reason=reason)
        except SKIPPABLE as exc:
            outcome.skipped.append((task_id, str(exc) or type(exc).__name__))
        else:
            outcome.done.append(task_id)
    return outcome
