"""The checkpoints app's answers to the core's domain events (tasks.signals), connected by
CheckpointsConfig.ready(): a review's decision reaches recovery through them, without
importing this app."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from checkpoints.recovery import RecoveryConflict, RecoveryInvalid, checkpoint_rollback


def on_restart_requested(
    *, task_id: Any, checkpoint_id: Any, user: User, reason: str, **_: Any
) -> tuple[str, str] | None:
    """A `version_drift` review decided `restart`: roll back to the checkpoint and resume
    (checkpoint_rollback; its refusal is the decision's)."""
    try:
        checkpoint_rollback(
            task_id=task_id, checkpoint_id=checkpoint_id, user=user, reason=reason, resume=True
        )
    except RecoveryInvalid as exc:
        return ("checkpoint_id" if exc.field == "checkpoint_id" else exc.field, exc.message)
    except RecoveryConflict as exc:
        return ("", str(exc))
    return None
