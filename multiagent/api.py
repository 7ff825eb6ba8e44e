"""`/api/v1/tasks/{id}/…` endpoints of multi-agent groups: the group, its global checkpoints
(list, or take one now), group rollback with its preview. `{id}` may be any task of the group;
they act on the group's root. Thin: parse, call one service or selector, shape the output."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from harness_base.config import harness_config
from harness_base.http import AuthedRequest
from multiagent import coordinator, recovery, selectors
from tasks.schemas import ERRORS
from tasks.selectors import access_task, user_can_operate
from tasks.states import IllegalTransition, TransitionConflict
from tasks.web.api_auth import OPERATE
from tasks.web.api_utils import optional_body

router = Router(tags=["multi-agent"])


class ParticipantOut(Schema):
    task_id: UUID
    checkpoint_id: UUID
    status: str = ""


class GlobalCheckpointOut(Schema):
    id: UUID
    seq: int
    created_at: datetime
    trigger: str
    participants: list[ParticipantOut]
    # The group's shared directory at the cut ({root, files, bytes}); null without one.
    shared_snapshot: dict[str, Any] | None = None
    superseded: bool


class RoundIn(Schema):
    reason: str = Field("", max_length=2000)


class RoundOut(Schema):
    id: UUID
    status: str
    trigger: str
    participants: list[UUID]
    deadline: datetime
    global_checkpoint_id: UUID | None

    @staticmethod
    def resolve_global_checkpoint_id(obj: Any) -> UUID | None:
        committed = getattr(obj, "global_checkpoint", None) if obj.status == "committed" else None
        return committed.id if committed is not None else None


class MemberOut(Schema):
    id: UUID
    parent_id: UUID | None
    agent_name: str
    title: str
    status: str
    current_step: int
    cost_usd: float


class GroupRollbackIn(Schema):
    global_checkpoint_id: UUID
    resume: bool = Field(False, description="queue the participants at once, or hold them")
    reason: str = Field(min_length=1, max_length=2000, description="recorded in the audit log")


class GroupRollbackOut(Schema):
    global_checkpoint_id: UUID
    seq: int
    participants: list[dict[str, Any]]
    canceled: list[str]
    global_checkpoints_superseded: int


class GroupPreviewOut(Schema):
    global_checkpoint_id: UUID
    seq: int
    allowed: bool
    blocked: str
    participants: list[dict[str, Any]]
    shared: dict[str, list[str]] | None = None
    canceled: list[UUID]
    superseded_global_seqs: list[int]


def _root(request: AuthedRequest, task_id: str):
    return selectors.group_root(access_task(request.user, task_id))


def _operate(request: AuthedRequest, task_id: str):
    root = _root(request, task_id)
    if not user_can_operate(request.user):
        raise HttpError(403, "only operators may do this")
    return root


def _global_checkpoint(root, global_checkpoint_id: UUID):
    found = selectors.global_checkpoint_get(root=root, global_checkpoint_id=global_checkpoint_id)
    if found is None:
        raise HttpError(404, "global checkpoint not found in this group")
    return found


@router.get("tasks/{task_id}/group", response={200: list[MemberOut], **ERRORS})
def group(request: AuthedRequest, task_id: str):
    """Every task of the group (the root first), with status, current step and cost."""
    return Status(200, selectors.group_members(root=_root(request, task_id)))


@router.get("tasks/{task_id}/global-checkpoints", response=list[GlobalCheckpointOut])
def global_checkpoints(request: AuthedRequest, task_id: str):
    """The group's global checkpoints (consistent cuts), oldest first."""
    return selectors.global_checkpoints(root=_root(request, task_id))


@router.post("tasks/{task_id}/global-checkpoints", auth=OPERATE, response={202: RoundOut, **ERRORS})
def global_checkpoint_take(request: AuthedRequest, task_id: str):
    """Take a global checkpoint now (two-phase commit): running agents prepare at their next
    step boundary; the round commits when all have, or aborts after the prepare timeout."""
    root = _operate(request, task_id)
    if "operator_request" not in harness_config().multi_agent.global_checkpoints:
        return Status(409, {"detail": "global checkpoints on request are switched off"})
    body = optional_body(request, RoundIn)
    try:
        round = coordinator.round_start(root_id=root.id, trigger="manual", reason=body.reason)
    except coordinator.RoundConflict as exc:
        return Status(409, {"detail": str(exc)})
    return Status(202, round)


@router.get(
    "tasks/{task_id}/global-checkpoints/rounds/{round_id}", response={200: RoundOut, **ERRORS}
)
def global_checkpoint_round(request: AuthedRequest, task_id: str, round_id: UUID):
    """A round's progress: preparing, committed (with its global checkpoint) or aborted."""
    found = selectors.round_get(root=_root(request, task_id), round_id=round_id)
    if found is None:
        raise HttpError(404, "round not found in this group")
    return Status(200, found)


@router.get("tasks/{task_id}/group-rollback/preview", response={200: GroupPreviewOut, **ERRORS})
def group_rollback_preview(request: AuthedRequest, task_id: str, global_checkpoint_id: UUID):
    """What rolling the whole group back would do, per agent: files restored and deleted,
    checkpoints superseded, tasks canceled, and whether it is allowed now."""
    root = _root(request, task_id)
    found = _global_checkpoint(root, global_checkpoint_id)
    return Status(200, recovery.group_rollback_preview(root=root, global_checkpoint=found))


@router.post(
    "tasks/{task_id}/group-rollback", auth=OPERATE, response={200: GroupRollbackOut, **ERRORS}
)
def group_rollback(request: AuthedRequest, task_id: str, body: GroupRollbackIn):
    """Roll every agent of the group back to the global checkpoint, all or nothing (409
    while any participant runs; 422 when one cannot be restored: nothing changes)."""
    root = _operate(request, task_id)
    try:
        result = recovery.group_rollback(
            root_id=root.id,
            global_checkpoint_id=body.global_checkpoint_id,
            user=request.user,
            reason=body.reason,
            resume=body.resume,
        )
    except (recovery.RecoveryConflict, TransitionConflict, IllegalTransition) as exc:
        return Status(409, {"detail": str(exc)})
    except recovery.RecoveryInvalid as exc:
        return Status(
            422, {"detail": exc.message, "errors": [{"field": exc.field, "message": exc.message}]}
        )
    return Status(200, result)
