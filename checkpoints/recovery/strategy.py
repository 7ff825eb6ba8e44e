"""task_recover: one entry point for a recovery whose strategy is chosen at recovery time,
`auto` included (checkpoints.selectors.recovery_plan)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from checkpoints.recovery.errors import RecoveryInvalid
from checkpoints.recovery.forking import RecoveryResult
from checkpoints.recovery.resume import task_forward, task_retry
from checkpoints.recovery.rollback import checkpoint_rollback
from checkpoints.selectors import recovery_plan
from tasks.models import Task

STRATEGIES = ("rollback", "retry", "forward", "auto")


def task_recover(
    *,
    task_id: Any,
    user: User | None,
    strategy: str,
    reason: str,
    resume: bool = True,
    checkpoint_id: Any = None,
) -> RecoveryResult:
    """One entry point for a recovery chosen at recovery time; `auto` follows
    `checkpoints.selectors.recovery_plan` (per-tool defaults, overridable per task) and says
    which strategy it chose and why (`RecoveryResult.why`, the audit entry's reason)."""
    if strategy not in STRATEGIES:
        raise RecoveryInvalid("strategy", f"strategy must be one of {', '.join(STRATEGIES)}")
    why = ""
    if strategy == "auto":
        plan = recovery_plan(task=Task.objects.get(id=task_id))
        strategy, why = plan.strategy, plan.why
        if strategy == "rollback":
            checkpoint_id = plan.checkpoint_id
        # The audit entry (action = the strategy) says why in its reason.
        chose = f"auto chose {strategy}: {why}"
        reason = (
            f"{reason} [{chose}]" if reason.strip() else ("" if strategy == "rollback" else chose)
        )
    if strategy == "rollback":
        if checkpoint_id is None:
            raise RecoveryInvalid("checkpoint_id", "rollback needs a checkpoint_id")
        result = checkpoint_rollback(
            task_id=task_id, checkpoint_id=checkpoint_id, user=user, reason=reason, resume=resume
        )
    elif strategy == "retry":
        result = task_retry(task_id=task_id, user=user, reason=reason, resume=resume)
    else:
        result = task_forward(task_id=task_id, user=user, reason=reason, resume=resume)
    result.why = why
    return result
