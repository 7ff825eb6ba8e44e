"""Calling a recovery service from an endpoint: `operate` (the task, for operators only) and
`run` (the service's refusals as HTTP statuses, its result as RecoveryOut's fields)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ninja import Status
from ninja.errors import HttpError

from checkpoints import recovery
from harness_base.http import AuthedRequest
from tasks.models import Task
from tasks.selectors import access_task, user_can_operate
from tasks.states import IllegalTransition, TransitionConflict


def operate(request: AuthedRequest, task_id: str) -> Task:
    task = access_task(request.user, task_id)
    if not user_can_operate(request.user):
        raise HttpError(403, "only operators may do this")
    return task


def run(action: Callable[..., Any], **kwargs: Any) -> Status[Any]:
    """Call a recovery service, mapping its refusals onto HTTP statuses."""
    try:
        result = action(**kwargs)
    except (recovery.RecoveryConflict, TransitionConflict, IllegalTransition) as exc:
        return Status(409, {"detail": str(exc)})
    except recovery.RecoveryInvalid as exc:
        return Status(
            422, {"detail": exc.message, "errors": [{"field": exc.field, "message": exc.message}]}
        )
    if not isinstance(result, recovery.RecoveryResult):
        return Status(200, result)
    restored = result.restored
    return Status(
        200,
        {
            "kind": result.kind,
            "task": result.task,
            "checkpoint": result.checkpoint,
            "from_checkpoint": result.base.id if result.base else None,
            "graph_checkpoint_id": result.graph_checkpoint_id,
            "files_restored": restored.written if restored else [],
            "files_deleted": restored.deleted if restored else [],
            "links_deleted": restored.links if restored else [],
            "folders_deleted": restored.folders if restored else [],
            "superseded": result.superseded,
            "spec_changes": (
                {"before": result.revision.before, "after": result.revision.after}
                if result.revision
                else {}
            ),
            "why": result.why,
        },
    )
