"""What the recovery endpoints take and answer: a checkpoint, rollback / retry / resume /
recover bodies, a recovery's result, a rollback preview, the plan, a diff; ERRORS."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Field, Schema
from pydantic import ConfigDict

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_verify
from tasks.schemas import TaskOut
from tasks.spec import RetryChanges


class CheckpointOut(Schema):
    id: UUID
    name: str
    # As it reads: "before write_file etc/nginx.conf · step 4" (Checkpoint.label).
    label: str
    # The call a tool-level checkpoint precedes ("write_file etc/nginx.conf"), else "".
    subject: str
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
    # The code the checkpoint was made with (docs/deploying.md); {} before it was recorded.
    versions: dict[str, Any]

    @staticmethod
    def resolve_checksum_ok(obj: Checkpoint) -> bool:
        return checkpoint_verify(obj)


Reason = Field(min_length=1, max_length=2000, description="why (recorded in the audit log)")


class RollbackIn(Schema):
    checkpoint_id: UUID
    resume: bool = Field(False, description="queue the task at once (true) or hold it (false)")
    reason: str = Reason


class CompensationIn(Schema):
    decision: Literal["retry", "mark_done", "skip"] = Field(
        description="retry the failed compensation, mark it done (undone by hand) or skip it "
        "(the effect stays in the world)"
    )
    comment: str = Field("", max_length=2000)


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


class CompensationOut(Schema):
    """A compensating call a rollback runs: `tool` with `arguments`, undoing the call
    `call_id`; `review`: the review policy will pause it. `outcome_unknown`: whether that call
    took effect is unknown, so a person decides first (`arguments` is then null when it needs
    the result the call never returned: `unresolved` says so)."""

    call_id: str
    tool: str
    arguments: dict[str, Any] | None
    review: bool
    outcome_unknown: bool = False
    unresolved: str = ""
    # The call it undoes: call_id, tool, arguments, status, step_index.
    original: dict[str, Any]


class IrreversibleOut(Schema):
    """A call whose effect outside the workspace a rollback cannot undo, and why (declared
    irreversible, no compensation declared, or its compensation could not be computed)."""

    call_id: str
    tool: str
    why: str
    arguments: dict[str, Any]
    status: str
    step_index: int


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
    # The compensating calls, in the order the rollback runs them (the reverse of the calls').
    compensations: list[CompensationOut]
    irreversible: list[IrreversibleOut]
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
