"""What every recovery operation starts with: who acts, the task row locked and checked, a
reason, and the newest valid checkpoint to go on from. checkpoints.fork's adoption of a branch
uses the same lock and checks."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from checkpoints.recovery.errors import RecoveryConflict, RecoveryInvalid
from checkpoints.selectors import recovery_blocked
from checkpoints.services import LoadedCheckpoint, NoValidCheckpoint, checkpoint_load_latest_valid
from tasks.models import Task


def actor_of(user: User | None) -> str:
    return user.get_username() if user is not None and user.is_authenticated else "system"


def lock_for_recovery(task_id: Any, *, refuse: tuple[str, ...] = ()) -> Task:
    # Lock contract: the task row first (as task_transition does), then checkpoints.
    task = Task.objects.select_for_update().get(id=task_id)
    blocked = recovery_blocked(task)
    if blocked:
        raise RecoveryConflict(blocked)
    if task.status in refuse:
        raise RecoveryConflict(f"the task is {task.status}")
    return task


def reason_required(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise RecoveryInvalid("reason", "a reason is required")
    return reason[:2000]


def newest_valid(task: Task) -> LoadedCheckpoint:
    try:
        loaded = checkpoint_load_latest_valid(task_id=task.id, head_id=task.head_checkpoint_id)
    except NoValidCheckpoint as exc:
        raise RecoveryConflict(str(exc)) from None
    if loaded is None:
        raise RecoveryConflict("the task has no checkpoint to recover from")
    return loaded
