"""The plan `auto` follows: what recovering a failed task does, and from which checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkpoints.models import Checkpoint
from checkpoints.selectors.calls import RETRYABLE, tool_or_none
from checkpoints.services import (
    CheckpointCorrupted,
    LoadedCheckpoint,
    checkpoint_decode,
    checkpoint_find_latest_valid,
)
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.spec import TaskSpec


@dataclass(frozen=True)
class RecoveryPlan:
    strategy: str  # rollback | retry | forward
    why: str
    checkpoint_id: Any = None
    failed_call: str | None = None


def failed_call(task: Task, loaded: LoadedCheckpoint) -> ToolCall | None:
    """The failed (or interrupted) call of the step the checkpoint is in, or of the step it
    has just finished."""
    rows = ToolCall.objects.filter(
        task=task, status__in=(*RETRYABLE, ToolCallStatus.UNKNOWN_OUTCOME, ToolCallStatus.RUNNING)
    )
    state = loaded.state
    if state.phase == "tools":
        return rows.filter(call_id__in=[c.call_id for c in state.pending]).order_by("-id").first()
    return rows.filter(step_index=max(state.step_index - 1, 0)).order_by("-id").first()


def step_checkpoint(*, task: Task, step_index: int, before_seq: int) -> Checkpoint | None:
    """The step's `after_model` checkpoint: its tool calls are about to run."""
    return (
        Checkpoint.objects.filter(
            task=task,
            trigger="after_model",
            step_index=step_index,
            superseded=False,
            seq__lte=before_seq,
        )
        .order_by("-seq")
        .first()
    )


def step_start_checkpoint(*, task: Task, step_index: int, before_seq: int) -> Checkpoint | None:
    """The newest valid checkpoint at the start of a step (next is a model call)."""
    for cp in Checkpoint.objects.filter(
        task=task,
        step_index=step_index,
        seq__lte=before_seq,
        superseded=False,
        trigger__in=("after_step", "task_start", "rollback"),
    ).order_by("-seq"):
        try:
            if checkpoint_decode(cp).state.phase == "model":
                return cp
        except CheckpointCorrupted:
            continue
    return None


def recovery_plan(*, task: Task) -> RecoveryPlan:
    """What `auto` does: look at the failed call of the newest valid checkpoint's step; a batch
    already partly done goes forward (nothing done is redone); otherwise the call's tool
    decides — the task spec's `recovery` entry for it, else the tool's registry default
    (writes roll back, external calls retry, batch tools go forward)."""
    loaded, _ = checkpoint_find_latest_valid(task_id=task.id, head_id=task.head_checkpoint_id)
    if loaded is None:
        return RecoveryPlan("forward", "no valid checkpoint to recover from")
    row = failed_call(task, loaded)
    if row is None:
        return RecoveryPlan(
            "forward",
            "no failed tool call: continue from the newest valid checkpoint",
            checkpoint_id=loaded.checkpoint.id,
        )
    step = step_checkpoint(task=task, step_index=row.step_index, before_seq=loaded.checkpoint.seq)
    pending = loaded.state.pending
    if step is not None:
        try:
            pending = checkpoint_decode(step).state.pending
        except CheckpointCorrupted:
            pass
    done_in_batch = ToolCall.objects.filter(
        task=task,
        call_id__in=[c.call_id for c in pending if c.call_id != row.call_id],
        status=ToolCallStatus.SUCCEEDED,
    ).exists()
    if len(pending) > 1 and done_in_batch:
        return RecoveryPlan(
            "forward",
            "the failed call is part of a batch already partly "
            "done; continue it without redoing finished calls",
            checkpoint_id=loaded.checkpoint.id,
            failed_call=row.call_id,
        )
    spec = TaskSpec.model_validate(task.spec)
    strategy = spec.recovery.get(row.tool, "auto")
    source = f"the task's recovery setting for {row.tool}"
    if strategy == "auto":
        tool = tool_or_none(row.tool, task_id=task.id)
        strategy = tool.recovery if tool is not None else "forward"
        source = f"{row.tool}'s default"
    if strategy == "rollback":
        start = step_start_checkpoint(
            task=task, step_index=row.step_index, before_seq=loaded.checkpoint.seq
        )
        if start is not None:
            return RecoveryPlan(
                "rollback",
                f"{source} is rollback: undo step {row.step_index} and decide it again",
                checkpoint_id=start.id,
                failed_call=row.call_id,
            )
        strategy, source = "retry", f"{source} is rollback but the step has no start checkpoint"
    return RecoveryPlan(
        strategy,
        f"{source} is {strategy}",
        checkpoint_id=loaded.checkpoint.id,
        failed_call=row.call_id,
    )
