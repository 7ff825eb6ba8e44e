"""`/api/v1/tasks…` endpoints. Thin: parse, call one service or selector, shape the output."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError
from ninja.pagination import paginate

from checkpoints import recovery
from checkpoints.api import CheckpointOut
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoints_with_sources
from dashboard.outputs import output_download
from harness_base.http import AuthedRequest
from tasks import selectors, services
from tasks.models import ToolOutput
from tasks.schemas import ErrorOut, TaskOut
from tasks.spec import TaskSpec
from tasks.states import IllegalTransition, TransitionConflict
from tasks.web.api_auth import CREATE, OPERATE
from tasks.web.api_utils import optional_body
from tasks.web.pagination import ApiPagination

router = Router(tags=["tasks"])


class EventOut(Schema):
    seq: int
    type: str
    step_index: int | None
    actor: str
    payload: dict[str, Any]
    created_at: datetime


class ToolOutputOut(Schema):
    """One part of what an attempt produced (tasks.outputs); `preview` is its first 8 KiB as
    text, `download_url` serves the stored bytes (`stored` of `size`)."""

    id: int
    attempt: int
    name: str
    kind: str
    media_type: str
    size: int
    stored: int
    partial: bool
    link: str
    preview: str
    download_url: str

    @staticmethod
    def resolve_download_url(obj: ToolOutput) -> str:
        return f"/api/v1/tasks/{obj.task_id}/outputs/{obj.id}"


class ToolCallOut(Schema):
    call_id: str
    tool: str
    arguments: dict[str, Any]
    risk: str
    status: str
    step_index: int
    attempts: int
    attempt_log: list[dict[str, Any]]
    result: Any = None
    error_class: str
    error_message: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: float | None
    # Every attempt's output parts, oldest first.
    outputs: list[ToolOutputOut] = []


# What ToolCallOut reads off a call's row; its outputs are the call's ToolOutput rows.
_CALL_COLUMNS = tuple(name for name in ToolCallOut.model_fields if name != "outputs")


class CancelIn(Schema):
    reason: str = ""


class PriorityIn(Schema):
    priority: Literal["high", "default", "low"]


def _conflict(exc: Exception) -> HttpError:
    return HttpError(409, str(exc))


def _require_operator(request: AuthedRequest) -> None:
    if not selectors.user_can_operate(request.user):
        raise HttpError(403, "only operators may do this")


@router.post("tasks", auth=CREATE, response={201: TaskOut, 403: ErrorOut, 422: ErrorOut})
def task_create(request: AuthedRequest, spec: TaskSpec):
    try:
        task = services.task_create(spec=spec, user=request.user)
    except services.SpecError as exc:
        return Status(
            422,
            {
                "detail": "invalid task spec",
                "errors": [{"field": exc.field, "message": exc.message}],
            },
        )
    return Status(201, task)


@router.get("tasks", response=list[TaskOut])
@paginate(ApiPagination, page_size=50)
def task_list(request: AuthedRequest, status: str | None = None, q: str | None = None):
    return selectors.tasks_list(status=status, q=q, with_children=True)


@router.get("tasks/{task_id}", response=TaskOut)
def task_get(request: AuthedRequest, task_id: str):
    return selectors.access_task(request.user, task_id)


@router.get("tasks/{task_id}/checkpoints", response=list[CheckpointOut])
def task_checkpoints(request: AuthedRequest, task_id: str):
    task = selectors.access_task(request.user, task_id)
    return checkpoints_with_sources(Checkpoint.objects.filter(task=task).order_by("seq"))


@router.get("tasks/{task_id}/events", response=list[EventOut])
def task_events(
    request: AuthedRequest, task_id: str, after: int | None = Query(None, ge=0, le=2**63 - 1)
):
    task = selectors.access_task(request.user, task_id)
    return [
        {
            "seq": e.id,
            "type": e.type,
            "step_index": e.step_index,
            "actor": e.actor,
            "payload": e.payload,
            "created_at": e.created_at,
        }
        for e in selectors.task_events(task=task, after=after)
    ]


@router.get("tasks/{task_id}/tool-calls", response=list[ToolCallOut])
def task_tool_calls(request: AuthedRequest, task_id: str):
    task = selectors.access_task(request.user, task_id)
    calls = list(selectors.task_tool_calls(task=task))
    outputs = selectors.task_call_outputs(task=task, call_ids=[call.call_id for call in calls])
    return [
        {
            **{name: getattr(call, name) for name in _CALL_COLUMNS},
            "outputs": [row for part in outputs.get(call.call_id, {}).values() for row in part],
        }
        for call in calls
    ]


@router.get("tasks/{task_id}/outputs/{output_id}", response={200: None, 404: ErrorOut})
def task_output(request: AuthedRequest, task_id: str, output_id: int):
    """One stored output part of a call: its bytes as a download (text/plain, a safe image
    type or application/octet-stream; attachment, nosniff)."""
    task = selectors.access_task(request.user, task_id)
    return output_download(selectors.tool_output_get(task=task, output_id=output_id))


@router.post(
    "tasks/{task_id}/cancel", auth=OPERATE, response={200: TaskOut, 403: ErrorOut, 409: ErrorOut}
)
def task_cancel(request: AuthedRequest, task_id: str):
    task = selectors.access_task(request.user, task_id)
    _require_operator(request)
    body = optional_body(request, CancelIn)
    try:
        return Status(
            200, recovery.task_cancel(task_id=task.id, user=request.user, reason=body.reason)
        )
    except (TransitionConflict, IllegalTransition) as exc:
        raise _conflict(exc) from None


@router.post(
    "tasks/{task_id}/priority",
    auth=OPERATE,
    response={200: TaskOut, 403: ErrorOut, 409: ErrorOut, 422: ErrorOut},
)
def task_priority(request: AuthedRequest, task_id: str, body: PriorityIn):
    """Change the task's priority (audited); a queued task's job moves to that queue at once."""
    task = selectors.access_task(request.user, task_id)
    _require_operator(request)
    try:
        return Status(
            200,
            services.task_priority_set(task_id=task.id, priority=body.priority, user=request.user),
        )
    except services.PriorityRefused as exc:
        raise _conflict(exc) from None
