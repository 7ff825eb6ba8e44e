"""Going on from where a task stopped: retry (the failed step again, from its step
checkpoint), forward (from the newest valid checkpoint) and resume (a held task queued; any
other stopped task goes forward)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from checkpoints.recovery.forking import (
    RecoveryResult,
    fork_checkpoint,
    spec_revise,
    workspace_snapshot,
)
from checkpoints.recovery.graph import graph_requeue
from checkpoints.recovery.guards import actor_of, lock_for_recovery, newest_valid
from checkpoints.recovery.state_edits import calls_rekey, last_failure, new_branch
from checkpoints.selectors import RETRYABLE, failed_call, graph_task, step_checkpoint
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from tasks import services
from tasks.agent_state import RecoveryNote
from tasks.models import Task, ToolCall
from tasks.spec import RetryChanges
from tasks.states import TaskStatus


def task_retry(
    *,
    task_id: Any,
    user: User | None,
    reason: str,
    resume: bool = True,
    changes: RetryChanges | None = None,
) -> RecoveryResult:
    """Re-run the failed step from its step checkpoint (the `after_model` checkpoint of the
    step): calls that succeeded replay from the ledger, calls that failed or timed out run
    again under fresh call_ids. Files are left as they are (they hold the successful calls'
    effects, which replay does not redo).

    `changes`: what the operator changes of the spec first (a raised `max_steps` for a task
    that stopped at its budget, longer timeouts, another model), checked as a new task's spec
    would be (RecoveryInvalid naming the field) and recorded before/after in the audit log."""
    reason = (reason or "").strip()[:2000] or "retry requested"
    with transaction.atomic():
        task = lock_for_recovery(task_id, refuse=(TaskStatus.SUCCEEDED, TaskStatus.WAITING_REVIEW))
        revision = spec_revise(task, changes)
        if graph_task(task):
            task = graph_requeue(
                task=task, user=user, kind="retry", reason=reason, revision=revision
            )
            return RecoveryResult(task, "retry", None, None, None, 0, revision=revision)
        newest = newest_valid(task)
        base = newest
        row = failed_call(task, newest)
        start = row and step_checkpoint(
            task=task, step_index=row.step_index, before_seq=newest.checkpoint.seq
        )
        if start:
            try:
                base = checkpoint_decode(start)
            except CheckpointCorrupted:
                base = newest
        state = base.state.model_copy(deep=True)
        pending_ids = [c.call_id for c in state.pending[state.next_call :]]
        failed = set(
            ToolCall.objects.filter(
                task=task, call_id__in=pending_ids, status__in=RETRYABLE
            ).values_list("call_id", flat=True)
        )
        state.branch = new_branch(task, state)
        rekeyed = calls_rekey(state, failed)
        state.recovery = RecoveryNote(
            kind="retry",
            reason=reason,
            actor=actor_of(user),
            from_seq=base.checkpoint.seq,
            last_failure=last_failure(task, newest.state),
            undone={"retried_calls": sorted(rekeyed)},
        )
        state.last_error = None
        snapshot = workspace_snapshot(task, newest)
        return fork_checkpoint(
            task=task,
            user=user,
            kind="retry",
            reason=reason,
            resume=resume,
            base=base,
            state=state,
            snapshot=snapshot,
            event={"retried_calls": sorted(rekeyed)},
            revision=revision,
        )


def task_forward(
    *,
    task_id: Any,
    user: User | None,
    reason: str,
    resume: bool = True,
) -> RecoveryResult:
    """Continue from the newest valid checkpoint (corrupted ones are skipped and recorded)."""
    reason = (reason or "").strip()[:2000] or "forward requested"
    with transaction.atomic():
        task = lock_for_recovery(task_id, refuse=(TaskStatus.SUCCEEDED, TaskStatus.WAITING_REVIEW))
        if graph_task(task):
            task = graph_requeue(task=task, user=user, kind="forward", reason=reason)
            return RecoveryResult(task, "forward", None, None, None, 0)
        base = newest_valid(task)
        state = base.state.model_copy(deep=True)
        state.recovery = RecoveryNote(
            kind="forward",
            reason=reason,
            actor=actor_of(user),
            from_seq=base.checkpoint.seq,
            last_failure=last_failure(task, state),
        )
        snapshot = workspace_snapshot(task, base)
        return fork_checkpoint(
            task=task,
            user=user,
            kind="forward",
            reason=reason,
            resume=resume,
            base=base,
            state=state,
            snapshot=snapshot,
        )


def task_resume(*, task_id: Any, user: User | None, reason: str = "") -> Task:
    """Resume a held task (its head already carries the recovery note). A failed, canceled
    or stalled task goes forward from its newest valid checkpoint instead."""
    with transaction.atomic():
        task = lock_for_recovery(task_id, refuse=(TaskStatus.SUCCEEDED, TaskStatus.WAITING_REVIEW))
        if task.status != TaskStatus.HELD:
            return task_forward(
                task_id=task_id, user=user, reason=reason or "resumed by operator"
            ).task
        task = services.task_transition(
            task_id=task.id,
            to=TaskStatus.QUEUED,
            actor=actor_of(user),
            reason=f"resumed: {reason}" if reason else "resumed",
        )
        services.task_enqueue(task=task, decided=True)
        services.audit_record(
            user=user,
            action="resume",
            task_id=task.id,
            reason=reason,
            before={"status": TaskStatus.HELD},
            after={"status": task.status},
        )
        return task
