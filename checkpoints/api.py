"""`/api/v1/tasks/{id}/…` recovery endpoints: rollback (with a preview), retry, resume,
recover (strategy chosen at recovery time, including `auto`), the recovery plan, and the diff
of two checkpoints. Thin: parse, call one service or selector, shape the output."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.http import HttpRequest
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError
from pydantic import ConfigDict

from checkpoints import recovery, selectors
from checkpoints.fork import ForkEdits, ForkRefused, task_adopt, task_fork
from checkpoints.models import Checkpoint
from checkpoints.services import CheckpointCorrupted, checkpoint_verify
from tasks.schemas import ErrorOut, TaskOut
from tasks.selectors import access_task, user_can_operate
from tasks.spec import RetryChanges
from tasks.states import IllegalTransition, TransitionConflict
from tasks.web.api_auth import OPERATE
from tasks.web.api_utils import optional_body

router = Router(tags=["recovery"])


class CheckpointOut(Schema):
    id: UUID
    name: str
    seq: int
    parent_id: UUID | None
    level: str
    trigger: str
    step_index: int
    created_at: datetime
    size_bytes: int
    checksum: str
    checksum_ok: bool
    superseded: bool

    @staticmethod
    def resolve_checksum_ok(obj: Checkpoint) -> bool:
        return checkpoint_verify(obj)


Reason = Field(min_length=1, max_length=2000, description="why (recorded in the audit log)")


class RollbackIn(Schema):
    checkpoint_id: UUID
    resume: bool = Field(False, description="queue the task at once (true) or hold it (false)")
    reason: str = Reason


class RetryIn(RetryChanges):
    """An empty body retries as before; `budget` ({max_steps, max_tokens, session_timeout_s,
    turn_timeout_s, tool_timeout_s}) and `model` (an OpenAI-compatible model's name) change
    the spec first (422 naming the field when a value is out of bounds)."""

    # Unknown keys are ignored, as before the changes were added.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    resume: bool = True
    reason: str = Field("", max_length=2000)


class ResumeIn(Schema):
    reason: str = ""


class RecoverIn(Schema):
    strategy: Literal["rollback", "retry", "forward", "auto"] = "auto"
    checkpoint_id: UUID | None = Field(None, description="the rollback target")
    resume: bool = True
    reason: str = Field("", max_length=2000, description="required when this rolls back")


class RecoveryOut(Schema):
    kind: str
    task: TaskOut
    # None for a graph task, whose checkpoints are LangGraph's (graph_checkpoint_id).
    checkpoint: CheckpointOut | None
    from_checkpoint: UUID | None
    graph_checkpoint_id: str = ""
    files_restored: list[str]
    files_deleted: list[str]
    links_deleted: list[str] = []
    folders_deleted: list[str] = []
    superseded: int
    # What a retry changed of the spec: {"before": {field: value}, "after": {...}} ({} if none).
    spec_changes: dict[str, dict[str, Any]] = {}
    # Why `auto` chose this strategy (recover with strategy auto; "" otherwise).
    why: str = ""


class PreviewOut(Schema):
    task_id: UUID
    task_status: str
    checkpoint_id: UUID
    checkpoint_seq: int
    checkpoint_name: str
    checksum_ok: bool
    allowed: bool
    blocked: str
    files_restore: list[str]
    files_delete: list[str]
    files_mode: list[str]
    # Symlinks (and fifos, sockets) and folders the rollback removes.
    links_delete: list[str]
    folders_delete: list[str]
    workspace_source: str
    steps_undone: list[dict[str, Any]]
    calls_undone: list[dict[str, Any]]
    irreversible: list[dict[str, Any]]
    superseded_seqs: list[int]


class PlanOut(Schema):
    strategy: str
    why: str
    checkpoint_id: UUID | None
    failed_call: str | None


class DiffOut(Schema):
    a: dict[str, Any]
    b: dict[str, Any]
    state: list[dict[str, Any]]
    messages: dict[str, Any]
    files: list[dict[str, Any]]


ERRORS = {403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut}


def _operate(request: HttpRequest, task_id: str):
    task = access_task(request.user, task_id)
    if not user_can_operate(request.user):
        raise HttpError(403, "only operators may do this")
    return task


def _run(action, **kwargs) -> Status:
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


@router.get("tasks/{task_id}/rollback/preview", response={200: PreviewOut, **ERRORS})
def rollback_preview(request: HttpRequest, task_id: str, checkpoint_id: UUID):
    """What rolling back to the checkpoint would do: files restored or deleted, steps and
    tool calls undone, side effects outside the workspace that cannot be undone."""
    task = access_task(request.user, task_id)
    checkpoint = selectors.checkpoint_get(task=task, checkpoint_id=checkpoint_id)
    return Status(200, selectors.rollback_preview(task=task, checkpoint=checkpoint).as_dict())


@router.post("tasks/{task_id}/rollback", auth=OPERATE, response={200: RecoveryOut, **ERRORS})
def rollback(request: HttpRequest, task_id: str, body: RollbackIn):
    """Restore the workspace and agent state to the checkpoint (409 while running or
    queued); the new `rollback` checkpoint becomes head, later ones are superseded; then
    resume (queued) or hold (`held`, resume later with POST …/resume)."""
    task = _operate(request, task_id)
    return _run(
        recovery.checkpoint_rollback,
        task_id=task.id,
        checkpoint_id=body.checkpoint_id,
        user=request.user,
        reason=body.reason,
        resume=body.resume,
    )


@router.post("tasks/{task_id}/retry", auth=OPERATE, response={200: RecoveryOut, **ERRORS})
def retry(request: HttpRequest, task_id: str):
    """Re-run the failed step from its step checkpoint: failed or timed-out calls run again
    under fresh call_ids, finished ones replay from the ledger. An optional `budget` / `model`
    changes the spec first (a task stopped by `budget_exceeded` gets a higher `max_steps`),
    recorded before/after in the audit log."""
    task = _operate(request, task_id)
    body = optional_body(request, RetryIn)
    changes = RetryChanges(budget=body.budget, model=body.model)
    return _run(
        recovery.task_retry,
        task_id=task.id,
        user=request.user,
        reason=body.reason,
        resume=body.resume,
        changes=changes if changes.budget or changes.model else None,
    )


@router.post("tasks/{task_id}/recover", auth=OPERATE, response={200: RecoveryOut, **ERRORS})
def recover(request: HttpRequest, task_id: str):
    """Recover with a strategy chosen now: rollback (needs checkpoint_id), retry, forward, or
    auto (see GET …/recovery-plan; the answer's `kind` is the strategy it chose, `why` why)."""
    task = _operate(request, task_id)
    body = optional_body(request, RecoverIn)
    return _run(
        recovery.task_recover,
        task_id=task.id,
        user=request.user,
        strategy=body.strategy,
        reason=body.reason,
        resume=body.resume,
        checkpoint_id=body.checkpoint_id,
    )


@router.post("tasks/{task_id}/resume", auth=OPERATE, response={200: TaskOut, **ERRORS})
def resume(request: HttpRequest, task_id: str):
    """Resume a held task; a failed, canceled or stalled task goes forward from its newest
    valid checkpoint."""
    task = _operate(request, task_id)
    body = optional_body(request, ResumeIn)
    return _run(recovery.task_resume, task_id=task.id, user=request.user, reason=body.reason)


class GraphCheckpointOut(Schema):
    checkpoint_id: str
    parent_checkpoint_id: str | None
    step: int | None
    source: str
    parents: dict[str, str]
    run_id: str
    head: bool
    superseded: bool


class GraphPreviewOut(Schema):
    task_id: UUID
    task_status: str
    checkpoint_id: str
    step: int | None
    source: str
    allowed: bool
    blocked: str
    values: dict[str, Any]
    superseded: list[dict[str, Any]]
    # {"snapshot": bool, "files", "files_restored", "files_deleted", "links_deleted",
    #  "folders_deleted", "modes_restored"}
    workspace: dict[str, Any] = {}


@router.get("tasks/{task_id}/graph-checkpoints", response={200: list[GraphCheckpointOut], **ERRORS})
def graph_checkpoints(request: HttpRequest, task_id: str):
    """A graph task's LangGraph checkpoints, newest first, with LangGraph's metadata (source,
    step, parents); `superseded` ones were left behind by a rollback. POST …/rollback with one
    of these ids as `checkpoint_id` forks the graph from it."""
    task = access_task(request.user, task_id)
    return Status(200, selectors.graph_checkpoints(task=task))


@router.get("tasks/{task_id}/graph-rollback/preview", response={200: GraphPreviewOut, **ERRORS})
def graph_rollback_preview(request: HttpRequest, task_id: str, checkpoint_id: UUID):
    """What rolling a graph task back to this LangGraph checkpoint would do."""
    task = access_task(request.user, task_id)
    return _run(recovery.graph_rollback_preview, task=task, checkpoint_id=str(checkpoint_id))


@router.get("tasks/{task_id}/recovery-plan", response={200: PlanOut, **ERRORS})
def recovery_plan(request: HttpRequest, task_id: str):
    """What `auto` would do now, and why."""
    task = access_task(request.user, task_id)
    return Status(200, selectors.recovery_plan(task=task).__dict__)


@router.get("tasks/{task_id}/checkpoints/diff", response={200: DiffOut, **ERRORS})
def checkpoint_diff(request: HttpRequest, task_id: str, a: UUID, b: UUID):
    """AgentState differences and file changes (with text diffs) from checkpoint a to b."""
    task = access_task(request.user, task_id)
    first = selectors.checkpoint_get(task=task, checkpoint_id=a)
    second = selectors.checkpoint_get(task=task, checkpoint_id=b)
    try:
        return Status(200, selectors.checkpoint_diff(a=first, b=second).as_dict())
    except CheckpointCorrupted as exc:
        return Status(409, {"detail": str(exc)})


class ForkIn(ForkEdits):
    checkpoint_id: UUID
    reason: str = Field(default="", max_length=2000)


@router.post("tasks/{task_id}/fork", auth=OPERATE, response={201: TaskOut, **ERRORS})
def fork(request: HttpRequest, task_id: str, body: ForkIn):
    """A sibling task from one of this task's checkpoints (its state, edited, and its
    workspace): messages by index, pending calls' arguments by call id, the system prompt,
    the budget. The original is left untouched; the sibling's `fork_of` names it."""
    task = _operate(request, task_id)
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


@router.post("tasks/{task_id}/adopt", auth=OPERATE, response={200: TaskOut, **ERRORS})
def adopt(request: HttpRequest, task_id: str, body: AdoptIn):
    """ "Adopt this branch": roll the task forward to its finished fork's head (state and
    workspace) and resume it from there; audited."""
    task = _operate(request, task_id)
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
