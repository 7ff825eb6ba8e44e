"""Declaring a task's recovery endpoint and calling a recovery service from it: `task_get` /
`task_post` (the route, its answers and its operation_id), `operate` (the task, for operators
only) and `run` (the service's refusals as HTTP statuses, its result as RecoveryOut's fields)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ninja import Router, Status
from ninja.errors import HttpError

from checkpoints import recovery
from harness_base.http import AuthedRequest
from tasks.models import Task
from tasks.schemas import ERRORS
from tasks.selectors import access_task, user_can_operate
from tasks.states import IllegalTransition, TransitionConflict
from tasks.web.api_auth import OPERATE

View = TypeVar("View", bound=Callable[..., Status[Any]])


def task_get(router: Router, path: str, name: str, out: Any) -> Callable[[View], View]:
    """GET tasks/{task_id}/<path>: `out`, or an error (ERRORS). Its operation_id is
    checkpoints_api_<name>, the one it had when the endpoints were one module."""
    return router.get(
        f"tasks/{{task_id}}/{path}",
        response={200: out, **ERRORS},
        operation_id=f"checkpoints_api_{name}",
    )


def task_post(
    router: Router, path: str, name: str, out: Any, *, status: int = 200
) -> Callable[[View], View]:
    """POST tasks/{task_id}/<path>, operators only: `out` with `status`, or an error (ERRORS);
    its operation_id as task_get's."""
    return router.post(
        f"tasks/{{task_id}}/{path}",
        auth=OPERATE,
        response={status: out, **ERRORS},
        operation_id=f"checkpoints_api_{name}",
    )


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
