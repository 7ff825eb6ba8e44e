"""`/api/v1/tasks/{id}/…`: fork a sibling task from a checkpoint, adopt a finished fork."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ninja import Field, Router, Schema, Status

from checkpoints import recovery
from checkpoints.api.calls import operate, task_post
from checkpoints.fork import ForkEdits, ForkRefused, task_adopt, task_fork
from harness_base.http import AuthedRequest
from tasks.schemas import TaskOut
from tasks.selectors import access_task
from tasks.states import IllegalTransition, TransitionConflict

router = Router()


class ForkIn(ForkEdits):
    checkpoint_id: UUID
    reason: str = Field(default="", max_length=2000)


@task_post(router, "fork", "fork", TaskOut, status=201)
def fork(request: AuthedRequest, task_id: str, body: ForkIn) -> Status[Any]:
    """A sibling task from one of this task's checkpoints (its state, edited, and its
    workspace): messages by index, pending calls' arguments by call id, the system prompt,
    the budget. The original is left untouched; the sibling's `fork_of` names it."""
    task = operate(request, task_id)
    edits = ForkEdits.model_validate(body.model_dump(exclude={"checkpoint_id", "reason"}))
    try:
        sibling = task_fork(
            task=task,
            checkpoint_id=body.checkpoint_id,
            user=request.user,
            edits=edits,
            reason=body.reason,
        )
    except ForkRefused as exc:
        return Status(
            422,
            {"detail": "invalid fork", "errors": [{"field": exc.field, "message": exc.message}]},
        )
    return Status(201, sibling)


class AdoptIn(Schema):
    sibling_id: UUID
    reason: str = Field(min_length=1, max_length=2000)


@task_post(router, "adopt", "adopt", TaskOut)
def adopt(request: AuthedRequest, task_id: str, body: AdoptIn) -> Status[Any]:
    """ "Adopt this branch": roll the task forward to its finished fork's head (state and
    workspace) and resume it from there; audited."""
    task = operate(request, task_id)
    sibling = access_task(request.user, body.sibling_id)
    try:
        adopted = task_adopt(
            task_id=task.id, sibling=sibling, user=request.user, reason=body.reason
        )
    except ForkRefused as exc:
        return Status(
            422,
            {"detail": "cannot adopt", "errors": [{"field": exc.field, "message": exc.message}]},
        )
    except (recovery.RecoveryConflict, TransitionConflict, IllegalTransition) as exc:
        return Status(409, {"detail": str(exc)})
    return Status(200, adopted)
