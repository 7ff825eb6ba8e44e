"""`/api/v1/tasks/{id}/…`: rollback (with a preview), retry, recover, resume."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ninja import Router, Status

from checkpoints import recovery, selectors
from checkpoints.api.calls import operate, run, task_get, task_post
from checkpoints.api.schemas import (
    CompensationIn,
    PreviewOut,
    RecoverIn,
    RecoveryOut,
    ResumeIn,
    RetryIn,
    RollbackIn,
)
from harness_base.http import AuthedRequest
from tasks.schemas import TaskOut
from tasks.selectors import access_task
from tasks.spec import RetryChanges
from tasks.web.api_utils import optional_body

router = Router()


@task_get(router, "rollback/preview", "rollback_preview", PreviewOut)
def rollback_preview(request: AuthedRequest, task_id: str, checkpoint_id: UUID) -> Status[Any]:
    """What rolling back to the checkpoint would do: files restored or deleted, steps and
    tool calls undone, side effects outside the workspace that cannot be undone."""
    task = access_task(request.user, task_id)
    checkpoint = selectors.checkpoint_get(task=task, checkpoint_id=checkpoint_id)
    return Status(200, selectors.rollback_preview(task=task, checkpoint=checkpoint).as_dict())


@task_post(router, "rollback", "rollback", RecoveryOut)
def rollback(request: AuthedRequest, task_id: str, body: RollbackIn) -> Status[Any]:
    """Restore the workspace and agent state to the checkpoint (409 while running or
    queued); the new `rollback` checkpoint becomes head, later ones are superseded; then
    resume (queued) or hold (`held`, resume later with POST …/resume)."""
    task = operate(request, task_id)
    return run(
        recovery.checkpoint_rollback,
        task_id=task.id,
        checkpoint_id=body.checkpoint_id,
        user=request.user,
        reason=body.reason,
        resume=body.resume,
    )


@task_post(router, "retry", "retry", RecoveryOut)
def retry(request: AuthedRequest, task_id: str) -> Status[Any]:
    """Re-run the failed step from its step checkpoint: failed or timed-out calls run again
    under fresh call_ids, finished ones replay from the ledger. An optional `budget` / `model`
    changes the spec first (a task stopped by `budget_exceeded` gets a higher `max_steps`),
    recorded before/after in the audit log."""
    task = operate(request, task_id)
    body = optional_body(request, RetryIn)
    changes = RetryChanges(budget=body.budget, model=body.model)
    return run(
        recovery.task_retry,
        task_id=task.id,
        user=request.user,
        reason=body.reason,
        resume=body.resume,
        changes=changes if changes.budget or changes.model else None,
    )


@task_post(router, "recover", "recover", RecoveryOut)
def recover(request: AuthedRequest, task_id: str) -> Status[Any]:
    """Recover with a strategy chosen now: rollback (needs checkpoint_id), retry, forward, or
    auto (see GET …/recovery-plan; the answer's `kind` is the strategy it chose, `why` why)."""
    task = operate(request, task_id)
    body = optional_body(request, RecoverIn)
    return run(
        recovery.task_recover,
        task_id=task.id,
        user=request.user,
        strategy=body.strategy,
        reason=body.reason,
        resume=body.resume,
        checkpoint_id=body.checkpoint_id,
    )


@task_post(router, "resume", "resume", TaskOut)
def resume(request: AuthedRequest, task_id: str) -> Status[Any]:
    """Resume a held task; a failed, canceled or stalled task goes forward from its newest
    valid checkpoint."""
    task = operate(request, task_id)
    body = optional_body(request, ResumeIn)
    return run(recovery.task_resume, task_id=task.id, user=request.user, reason=body.reason)


@task_post(router, "compensation", "compensation", TaskOut)
def compensation(request: AuthedRequest, task_id: str, body: CompensationIn) -> Status[Any]:
    """A rollback's compensation failed for good (the task is `compensation_failed`, its error
    names the effect still in the world): `retry` it, `mark_done` (undone by hand) or `skip`
    it (the effect stays); the task is queued and goes on with the rollback (409 otherwise)."""
    task = operate(request, task_id)
    return run(
        recovery.compensation_decide,
        task_id=task.id,
        user=request.user,
        decision=body.decision,
        comment=body.comment,
    )
