"""`/api/v1/tasks/{id}/…`: the recovery plan (what `auto` would do) and the diff of two
checkpoints."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ninja import Router, Status

from checkpoints import selectors
from checkpoints.api.calls import task_get
from checkpoints.api.schemas import DiffOut, PlanOut
from checkpoints.services import CheckpointCorrupted
from harness_base.http import AuthedRequest
from tasks.selectors import access_task

router = Router()


@task_get(router, "recovery-plan", "recovery_plan", PlanOut)
def recovery_plan(request: AuthedRequest, task_id: str) -> Status[Any]:
    """What `auto` would do now, and why."""
    task = access_task(request.user, task_id)
    return Status(200, selectors.recovery_plan(task=task).__dict__)


@task_get(router, "checkpoints/diff", "checkpoint_diff", DiffOut)
def checkpoint_diff(request: AuthedRequest, task_id: str, a: UUID, b: UUID) -> Status[Any]:
    """AgentState differences and file changes (with text diffs) from checkpoint a to b."""
    task = access_task(request.user, task_id)
    first = selectors.checkpoint_get(task=task, checkpoint_id=a)
    second = selectors.checkpoint_get(task=task, checkpoint_id=b)
    try:
        return Status(200, selectors.checkpoint_diff(a=first, b=second).as_dict())
    except CheckpointCorrupted as exc:
        return Status(409, {"detail": str(exc)})
