"""Rollback (checkpoint_rollback): back to an earlier checkpoint, its workspace and its agent
state, forked as the new head; the files are restored once the fork has committed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from checkpoints.recovery.compensating import (
    compensating_record,
    compensations_into,
    compensations_noted,
)
from checkpoints.recovery.errors import RecoveryConflict, RecoveryInvalid
from checkpoints.recovery.forking import RecoveryResult, fork_checkpoint, restore_after_commit
from checkpoints.recovery.graph import graph_rollback
from checkpoints.recovery.guards import actor_of, lock_for_recovery, reason_required
from checkpoints.recovery.state_edits import calls_rekey, last_failure, live_call_ids, new_branch
from checkpoints.selectors import checkpoint_get, graph_task, rollback_plan
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from checkpoints.snapshots import removed_paths, restore_blocked
from tasks.agent_state import RecoveryNote
from tasks.models import Task
from tasks.signals import calls_undone, review_outcomes_recount
from tasks.states import TaskStatus


def checkpoint_rollback(
    *,
    task_id: Any,
    checkpoint_id: Any,
    user: User | None,
    reason: str,
    resume: bool,
) -> RecoveryResult:
    """Restore the workspace and AgentState to a checkpoint; the new `rollback` checkpoint
    becomes head; later ones are superseded. Pending calls of the restored state get fresh
    call_ids on a new branch, so they run again against the restored files."""
    reason = reason_required(reason)
    with transaction.atomic():
        task = lock_for_recovery(task_id)
        if graph_task(task):
            task, snapshot = graph_rollback(
                task=task, checkpoint_id=str(checkpoint_id), user=user, reason=reason, resume=resume
            )
            result = RecoveryResult(task, "rollback", None, None, None, 0, str(checkpoint_id))
            # A graph checkpoint written without a snapshot leaves the files alone.
            restores: list[tuple[str, Any, dict[str, Any] | None]] = (
                [("workspace", task.workspace_path, snapshot)] if snapshot else []
            )
        else:
            result = _task_rollback(
                task=task, checkpoint_id=checkpoint_id, user=user, reason=reason, resume=resume
            )
            restores = [("workspace", task.workspace_path, result.base_snapshot)]
    # Committed: now the files, with no lock held (see the package docstring, checkpoints.recovery).
    # A rollback with compensations is queued whatever `resume` said: its compensations run
    # (and the task is held after them when the operator asked for a hold).
    queued = result.task.status == TaskStatus.QUEUED
    done = restore_after_commit(restores, [result.task] if queued else [])
    result.restored = done.get("workspace", result.restored)
    return result


def _task_rollback(
    *,
    task: Task,
    checkpoint_id: Any,
    user: User | None,
    reason: str,
    resume: bool,
) -> RecoveryResult:
    """checkpoint_rollback's fork of a loop task: inside the caller's transaction, task row
    locked; changes no file (`restored` says what the restore after the commit will do)."""
    chosen = checkpoint_get(task=task, checkpoint_id=checkpoint_id)
    try:
        base = checkpoint_decode(chosen)
    except CheckpointCorrupted as exc:
        raise RecoveryInvalid("checkpoint_id", str(exc)) from None
    state = base.state.model_copy(deep=True)
    state.branch = new_branch(task, state)
    calls_rekey(state, None)
    blocked = restore_blocked(task.workspace_path)
    if blocked:
        raise RecoveryConflict(f"the workspace cannot be restored ({blocked})")
    # The plan the preview shows (checkpoints.selectors.rollback_plan), read (not written)
    # under the lock: the calls it undoes, and what the restore will change — the files are
    # restored, by the same computation, once the fork has committed.
    plan = rollback_plan(task=task, loaded=base)
    undone, restored = plan.calls_undone, plan.files
    # A standing rule that allowed an undone call pauses itself (review.standing).
    calls_undone.send(
        sender=None,
        tool_call_ids=[row.pk for row in undone],
        cause="rolled_back",
        detail=f"rollback by {actor_of(user)}: {reason}"[:200],
    )
    # The header's "1 call rejected · 1 call edited" counts only calls still on the branch.
    review_outcomes_recount.send(
        sender=None, task_id=task.id, live_call_ids=sorted(live_call_ids(state))
    )
    irreversible = [f"{row.tool} {row.call_id}" for row in plan.irreversible]
    compensations = compensations_into(state, plan.compensations, resume=resume)
    state.recovery = RecoveryNote(
        kind="rollback",
        reason=reason,
        actor=actor_of(user),
        from_seq=chosen.seq,
        last_failure=last_failure(task, state),
        undone={
            "files_restored": restored.written[:200],
            "files_deleted": removed_paths(restored)[:200],
            "calls": [f"{row.tool} {row.call_id} (step {row.step_index})" for row in undone][:100],
            "irreversible": irreversible[:100],
            "compensations": compensations_noted(compensations),
        },
    )
    state.last_error = None
    result = fork_checkpoint(
        task=task,
        user=user,
        kind="rollback",
        reason=reason,
        resume=resume or bool(compensations),
        base=base,
        state=state,
        snapshot=base.snapshot,
        restored=restored,
        event={
            "files_restored": len(restored.written),
            "files_deleted": len(restored.deleted),
            "links_deleted": len(restored.links),
            "folders_deleted": len(restored.folders),
            "folders_made": len(restored.made),
            "calls_undone": len(undone),
            "irreversible": irreversible[:20],
            "compensations": len(compensations),
        },
        enqueue=False,
    )
    if compensations:
        compensating_record(task_id=task.id, actor=actor_of(user), state=state)
    result.base_snapshot = base.snapshot
    return result
