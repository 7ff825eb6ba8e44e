"""Operator control of a task's run: cancel, and the recovery operations (DESIGN §5) rollback,
retry, forward, resume and `auto`.

Every operation forks: it picks a base checkpoint, builds the state to continue from, writes a
new checkpoint (trigger `rollback` / `retry` / `forward`, parent = the base) that becomes the
task's head, marks the checkpoints after the base superseded (kept, never deleted), and then
either queues the task (resume) or leaves it `held` until an operator resumes it. The state
carries a RecoveryNote, which the loop turns into a context-alignment message on resume.

Lock contract: an operation locks the task row (select_for_update) first and holds it until
it commits, so operations on one task are serialised. They refuse (RecoveryConflict -> 409)
while the task is running or queued, so of two operations that both resume the task the
second finds it queued and is refused. A worker cannot take the task meanwhile: acquisition
is a conditional UPDATE on status=queued, which waits for the lock and then finds the status
the operation left.

Files after the commit: a rollback restores no file while it holds the lock. Under the lock it
decides (the checkpoint, the files that change) and commits the fork, whose snapshot is the
one to restore; only then are the files restored, and only after that is a resumed task put
on the queue, so no worker runs on a half-restored tree (`restore_after_commit`). A failed
commit changes no file. A crash or an I/O error after the commit leaves the workspace behind
its head, never ahead of a head it does not belong to, and that is repaired: the run syncs the
workspace to its head on start (the head carries a recovery note; a graph fork has no writes
yet), the sweep queues again a queued task whose job was never sent, and retry and forward
take a rollback head's snapshot, not the files on disk, while no run has continued from it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from langgraph.checkpoint.base.id import uuid6

from checkpoints.langgraph import DjangoCheckpointSaver
from checkpoints.models import Checkpoint, GraphWorkspace
from checkpoints.selectors import (
    RETRYABLE,
    checkpoint_get,
    failed_call,
    graph_checkpoints,
    graph_task,
    recovery_blocked,
    recovery_plan,
    rollback_plan,
    step_checkpoint,
)
from checkpoints.services import (
    CheckpointCorrupted,
    LoadedCheckpoint,
    NoValidCheckpoint,
    checkpoint_build,
    checkpoint_decode,
    checkpoint_fork_insert,
    checkpoint_load_latest_valid,
    checkpoint_next_seq,
)
from checkpoints.snapshots import (
    RestoreResult,
    removed_paths,
    restore_blocked,
    snapshot_capture,
    snapshot_restore,
    snapshot_restore_plan,
)
from tasks import services
from tasks.agent_state import AgentState, ErrorInfo, RecoveryNote
from tasks.events import EventType
from tasks.models import Task, ToolCall
from tasks.signals import calls_undone, history_superseded
from tasks.spec import RetryChanges
from tasks.states import TERMINAL, TaskStatus, TransitionConflict

STRATEGIES = ("rollback", "retry", "forward", "auto")
# Checkpoint triggers of a fork whose snapshot the workspace is restored to after the commit.
RESTORING_TRIGGERS = ("rollback", "group_rollback")

logger = logging.getLogger(__name__)


class RecoveryConflict(Exception):
    """The task is not in a state this operation can start from (HTTP 409)."""


class RecoveryInvalid(ValueError):
    """Bad input: no reason, an unknown or corrupted checkpoint (HTTP 422)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass
class RecoveryResult:
    task: Task
    kind: str
    # None for a graph task: its state is its LangGraph thread (see the end of this module).
    checkpoint: Checkpoint | None
    base: Checkpoint | None
    restored: RestoreResult | None
    superseded: int
    graph_checkpoint_id: str = ""
    # The snapshot a rollback restores after its commit.
    base_snapshot: dict | None = None
    # What a retry changed of the task's spec (budget, timeouts, model).
    revision: services.SpecRevision | None = None
    # Why `auto` chose this strategy (task_recover).
    why: str = ""


def _actor(user: AbstractBaseUser | None) -> str:
    return user.get_username() if user is not None and user.is_authenticated else "system"


def _lock(task_id: Any, *, refuse: tuple[str, ...] = ()) -> Task:
    # Lock contract: the task row first (as task_transition does), then checkpoints.
    task = Task.objects.select_for_update().get(id=task_id)
    blocked = recovery_blocked(task)
    if blocked:
        raise RecoveryConflict(blocked)
    if task.status in refuse:
        raise RecoveryConflict(f"the task is {task.status}")
    return task


def _require_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise RecoveryInvalid("reason", "a reason is required")
    return reason[:2000]


def _newest_valid(task: Task) -> LoadedCheckpoint:
    try:
        loaded = checkpoint_load_latest_valid(task_id=task.id, head_id=task.head_checkpoint_id)
    except NoValidCheckpoint as exc:
        raise RecoveryConflict(str(exc)) from None
    if loaded is None:
        raise RecoveryConflict("the task has no checkpoint to recover from")
    return loaded


def new_branch(task: Task, state: AgentState) -> int:
    """A branch number no call_id of this task has used, so calls on the new branch never
    collide with the ledger rows of superseded ones."""
    used = [state.branch]
    for call_id in ToolCall.objects.filter(task=task).values_list("call_id", flat=True):
        head = call_id.split(".", 1)[0]
        if head.isdigit():
            used.append(int(head))
    return max(used) + 1


def calls_rekey(state: AgentState, call_ids: set[str] | None) -> dict[str, str]:
    """Give fresh call_ids on the state's branch to the pending calls not yet finished (all of
    them, or those in `call_ids`), in `pending` and in the assistant message that proposed
    them, so they run again instead of replaying the ledger."""
    mapping: dict[str, str] = {}
    turn = max(state.turn_index - 1, 0)
    for index, call in enumerate(state.pending):
        if index >= state.next_call and (call_ids is None or call.call_id in call_ids):
            mapping[call.call_id] = f"{state.branch}.{turn}.{index}"
            call.call_id = mapping[call.call_id]
    for message in reversed(state.messages):
        if message.role == "assistant" and message.calls:
            for call in message.calls:
                call.call_id = mapping.get(call.call_id, call.call_id)
            break
    return mapping


def _last_failure(task: Task, state: AgentState) -> ErrorInfo | None:
    if task.error_class:
        return ErrorInfo(
            error_class=task.error_class,
            message=task.error_message[:2000],
            step_index=task.current_step,
        )
    return state.last_error


# A recovered task has no outcome yet: its result and error (and so its error fingerprint,
# which task_transition derives) are cleared with the move.
_OUTCOME_CLEARED = {"error_class": "", "error_message": "", "result": ""}


def _fork(
    *,
    task: Task,
    user: AbstractBaseUser | None,
    kind: str,
    reason: str,
    resume: bool,
    base: LoadedCheckpoint,
    state: AgentState,
    snapshot: dict | None,
    restored: RestoreResult | None = None,
    event: dict[str, Any] | None = None,
    enqueue: bool = True,
    revision: services.SpecRevision | None = None,
) -> RecoveryResult:
    """Write the forked checkpoint, supersede later ones, move the task, record it. Runs
    inside the caller's transaction, with the task row locked. `enqueue=False`: a resumed
    task is queued but its job is sent by the caller (after the files are restored).
    `revision`: what the operator changed of the spec, in the event and the audit entry."""
    actor = _actor(user)
    seq = checkpoint_next_seq(task_id=task.id)
    checkpoint = checkpoint_build(
        task_id=task.id,
        seq=seq,
        state=state,
        level="task",
        trigger=kind,
        snapshot=snapshot,
        parent_id=base.checkpoint.id,
    )
    superseded = checkpoint_fork_insert(checkpoint=checkpoint, base_seq=base.checkpoint.seq)
    before = {"status": task.status, "head_checkpoint": str(task.head_checkpoint_id or "")}
    services.task_fork_head(
        task=task, checkpoint_id=checkpoint.id, state=state, rollback=kind == "rollback"
    )
    history_superseded.send(sender=None, task_id=task.id, comment=f"superseded by {kind} ({actor})")
    services.event_record(
        task_id=task.id,
        type=kind,
        actor=actor,
        step_index=state.step_index,
        payload={
            "reason": reason,
            "resume": resume,
            "from_checkpoint": str(base.checkpoint.id),
            "from_seq": base.checkpoint.seq,
            "checkpoint_id": str(checkpoint.id),
            "seq": seq,
            "superseded": superseded,
            **(event or {}),
            **_revision_fields(revision),
        },
    )
    target = TaskStatus.QUEUED if resume else TaskStatus.HELD
    # The outcome goes with the status it belonged to, and the error fingerprint with the
    # error (a held task no longer counts in its old failure group).
    services.task_transition(
        task_id=task.id,
        to=target,
        stay=True,
        actor=actor,
        reason=f"{kind}: {reason}"[:500],
        fields=_OUTCOME_CLEARED,
    )
    task.refresh_from_db()
    if resume and enqueue:
        services.task_enqueue(task=task)
    services.audit_record(
        user=user,
        action=kind,
        task_id=task.id,
        reason=reason,
        target=f"{task.id} checkpoint {base.checkpoint.seq}",
        before={**before, **_revision_audit(revision, "before")},
        after={
            "status": task.status,
            "head_checkpoint": str(checkpoint.id),
            "superseded": superseded,
            **_revision_audit(revision, "after"),
        },
    )
    return RecoveryResult(
        task=task,
        kind=kind,
        checkpoint=checkpoint,
        base=base.checkpoint,
        restored=restored,
        superseded=superseded,
        revision=revision,
    )


# For checkpoints.fork's adoption of a branch: the same lock, checks and fork as a rollback's.
lock_for_recovery = _lock
newest_valid = _newest_valid
fork_checkpoint = _fork


def reason_required(reason: str) -> str:
    return _require_reason(reason)


def _revision_fields(revision: services.SpecRevision | None) -> dict[str, Any]:
    """A recovery event's record of the spec changes that came with it."""
    if revision is None:
        return {}
    return {"spec_changes": {"before": revision.before, "after": revision.after}}


def _revision_audit(revision: services.SpecRevision | None, side: str) -> dict[str, Any]:
    """The spec values a retry changed, as the audit entry's before / after show them."""
    return {} if revision is None else {"spec": getattr(revision, side)}


def _spec_revise(task: Task, changes: RetryChanges | None) -> services.SpecRevision | None:
    """Apply a retry's spec changes (inside its transaction): bad values are RecoveryInvalid
    naming the field, and the transaction writes nothing."""
    if changes is None:
        return None
    try:
        return services.task_spec_revise(task=task, changes=changes)
    except services.SpecError as exc:
        raise RecoveryInvalid(exc.field, exc.message) from None


def _workspace_snapshot(task: Task, newest: LoadedCheckpoint) -> dict | None:
    """The workspace as it is, where it lives on this machine; else the newest snapshot. A
    rollback's fork no run has continued from yet is its own snapshot: the files on disk may
    still be being restored to it, or a crash may have stopped that (the run syncs them)."""
    if newest.checkpoint.trigger in RESTORING_TRIGGERS or not task.workspace_path.is_dir():
        return newest.snapshot
    return snapshot_capture(task_id=task.id, workspace=task.workspace_path)


def restore_after_commit(
    restores: list[tuple[Any, Any, dict | None]], enqueue: list[Task]
) -> dict[Any, RestoreResult]:
    """Call once the recovery's transaction has committed, outside any transaction: restore
    each (key, directory, snapshot) — slow file I/O, with no row lock held — then send the
    jobs of the `enqueue` tasks, so no worker starts on a half-restored tree. A directory that
    cannot be restored is logged and left behind its head for the run to sync (see the module
    docstring); the others go on. A failed commit never gets here, so it changes no file.
    -> {key: what was restored}."""
    done: dict[Any, RestoreResult] = {}
    for key, path, snapshot in restores:
        try:
            done[key] = snapshot_restore(workspace=path, snapshot=snapshot)
        except Exception:
            logger.exception("restoring %s after a recovery failed; its run syncs it", path)
    for task in enqueue:
        services.task_enqueue(task=task)
    return done


# --- the operations ---------------------------------------------------------------------------


def checkpoint_rollback(
    *,
    task_id: Any,
    checkpoint_id: Any,
    user: AbstractBaseUser | None,
    reason: str,
    resume: bool,
) -> RecoveryResult:
    """Restore the workspace and AgentState to a checkpoint; the new `rollback` checkpoint
    becomes head; later ones are superseded. Pending calls of the restored state get fresh
    call_ids on a new branch, so they run again against the restored files."""
    reason = _require_reason(reason)
    with transaction.atomic():
        task = _lock(task_id)
        if graph_task(task):
            task, snapshot = _graph_rollback(
                task=task, checkpoint_id=str(checkpoint_id), user=user, reason=reason, resume=resume
            )
            result = RecoveryResult(task, "rollback", None, None, None, 0, str(checkpoint_id))
            # A graph checkpoint written without a snapshot leaves the files alone.
            restores = [("workspace", task.workspace_path, snapshot)] if snapshot else []
        else:
            result = _task_rollback(
                task=task, checkpoint_id=checkpoint_id, user=user, reason=reason, resume=resume
            )
            restores = [("workspace", task.workspace_path, result.base_snapshot)]
    # Committed: now the files, with no lock held (see the module docstring).
    done = restore_after_commit(restores, [result.task] if resume else [])
    result.restored = done.get("workspace", result.restored)
    return result


def _task_rollback(
    *,
    task: Task,
    checkpoint_id: Any,
    user: AbstractBaseUser | None,
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
        detail=f"rollback by {_actor(user)}: {reason}"[:200],
    )
    irreversible = [f"{row.tool} {row.call_id}" for row in plan.irreversible]
    state.recovery = RecoveryNote(
        kind="rollback",
        reason=reason,
        actor=_actor(user),
        from_seq=chosen.seq,
        last_failure=_last_failure(task, state),
        undone={
            "files_restored": restored.written[:200],
            "files_deleted": removed_paths(restored)[:200],
            "calls": [f"{row.tool} {row.call_id} (step {row.step_index})" for row in undone][:100],
            "irreversible": irreversible[:100],
        },
    )
    state.last_error = None
    result = _fork(
        task=task,
        user=user,
        kind="rollback",
        reason=reason,
        resume=resume,
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
        },
        enqueue=False,
    )
    result.base_snapshot = base.snapshot
    return result


def task_retry(
    *,
    task_id: Any,
    user: AbstractBaseUser | None,
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
        task = _lock(task_id, refuse=(TaskStatus.SUCCEEDED, TaskStatus.WAITING_REVIEW))
        revision = _spec_revise(task, changes)
        if graph_task(task):
            task = _graph_requeue(
                task=task, user=user, kind="retry", reason=reason, revision=revision
            )
            return RecoveryResult(task, "retry", None, None, None, 0, revision=revision)
        newest = _newest_valid(task)
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
            actor=_actor(user),
            from_seq=base.checkpoint.seq,
            last_failure=_last_failure(task, newest.state),
            undone={"retried_calls": sorted(rekeyed)},
        )
        state.last_error = None
        snapshot = _workspace_snapshot(task, newest)
        return _fork(
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
    user: AbstractBaseUser | None,
    reason: str,
    resume: bool = True,
) -> RecoveryResult:
    """Continue from the newest valid checkpoint (corrupted ones are skipped and recorded)."""
    reason = (reason or "").strip()[:2000] or "forward requested"
    with transaction.atomic():
        task = _lock(task_id, refuse=(TaskStatus.SUCCEEDED, TaskStatus.WAITING_REVIEW))
        if graph_task(task):
            task = _graph_requeue(task=task, user=user, kind="forward", reason=reason)
            return RecoveryResult(task, "forward", None, None, None, 0)
        base = _newest_valid(task)
        state = base.state.model_copy(deep=True)
        state.recovery = RecoveryNote(
            kind="forward",
            reason=reason,
            actor=_actor(user),
            from_seq=base.checkpoint.seq,
            last_failure=_last_failure(task, state),
        )
        snapshot = _workspace_snapshot(task, base)
        return _fork(
            task=task,
            user=user,
            kind="forward",
            reason=reason,
            resume=resume,
            base=base,
            state=state,
            snapshot=snapshot,
        )


def task_cancel(*, task_id: Any, user: AbstractBaseUser, reason: str = "") -> Task:
    """Cancel now when no worker holds the task; otherwise ask the worker to stop at its next
    boundary (it also stops a running tool). Cancel propagates down: every child task still
    going is canceled too."""
    actor = user.get_username()
    with transaction.atomic():
        for child_id in (
            Task.objects.filter(parent_id=task_id)
            .exclude(status__in=TERMINAL)
            .values_list("id", flat=True)
        ):
            task_cancel(task_id=child_id, user=user, reason=reason or f"parent {task_id} canceled")
        task = Task.objects.select_for_update().get(id=task_id)
        if task.status in TERMINAL:
            raise TransitionConflict(f"task is already {task.status}")
        if task.status == TaskStatus.RUNNING:
            services.task_cancel_request(task_id=task_id)
            services.event_record(
                task_id=task_id,
                type=EventType.CANCEL_REQUESTED,
                payload={"reason": reason},
                actor=actor,
            )
            services.audit_record(
                user=user,
                action="cancel",
                task_id=task_id,
                reason=reason,
                before={"status": task.status},
                after={"cancel_requested": True},
            )
            task.cancel_requested = True
            return task
        before = {"status": task.status}
        task = services.task_transition(
            task_id=task_id,
            to=TaskStatus.CANCELED,
            reason=reason or "canceled by operator",
            actor=actor,
            fields={"error_class": "canceled", "error_message": reason},
        )
        history_superseded.send(sender=None, task_id=task_id, comment=f"task canceled by {actor}")
        services.audit_record(
            user=user,
            action="cancel",
            task_id=task_id,
            reason=reason,
            before=before,
            after={"status": task.status},
        )
        return task


def task_resume(*, task_id: Any, user: AbstractBaseUser | None, reason: str = "") -> Task:
    """Resume a held task (its head already carries the recovery note). A failed, canceled
    or stalled task goes forward from its newest valid checkpoint instead."""
    with transaction.atomic():
        task = _lock(task_id, refuse=(TaskStatus.SUCCEEDED, TaskStatus.WAITING_REVIEW))
        if task.status != TaskStatus.HELD:
            return task_forward(
                task_id=task_id, user=user, reason=reason or "resumed by operator"
            ).task
        task = services.task_transition(
            task_id=task.id,
            to=TaskStatus.QUEUED,
            actor=_actor(user),
            reason=f"resumed: {reason}" if reason else "resumed",
        )
        services.task_enqueue(task=task)
        services.audit_record(
            user=user,
            action="resume",
            task_id=task.id,
            reason=reason,
            before={"status": TaskStatus.HELD},
            after={"status": task.status},
        )
        return task


def task_recover(
    *,
    task_id: Any,
    user: AbstractBaseUser | None,
    strategy: str,
    reason: str,
    resume: bool = True,
    checkpoint_id: Any = None,
) -> RecoveryResult:
    """One entry point for a recovery chosen at recovery time; `auto` follows
    `checkpoints.selectors.recovery_plan` (per-tool defaults, overridable per task) and says
    which strategy it chose and why (`RecoveryResult.why`, the audit entry's reason)."""
    if strategy not in STRATEGIES:
        raise RecoveryInvalid("strategy", f"strategy must be one of {', '.join(STRATEGIES)}")
    why = ""
    if strategy == "auto":
        plan = recovery_plan(task=Task.objects.get(id=task_id))
        strategy, why = plan.strategy, plan.why
        if strategy == "rollback":
            checkpoint_id = plan.checkpoint_id
        # The audit entry (action = the strategy) says why in its reason.
        chose = f"auto chose {strategy}: {why}"
        reason = (
            f"{reason} [{chose}]" if reason.strip() else ("" if strategy == "rollback" else chose)
        )
    if strategy == "rollback":
        if checkpoint_id is None:
            raise RecoveryInvalid("checkpoint_id", "rollback needs a checkpoint_id")
        result = checkpoint_rollback(
            task_id=task_id, checkpoint_id=checkpoint_id, user=user, reason=reason, resume=resume
        )
    elif strategy == "retry":
        result = task_retry(task_id=task_id, user=user, reason=reason, resume=resume)
    else:
        result = task_forward(task_id=task_id, user=user, reason=reason, resume=resume)
    result.why = why
    return result


# --- graph tasks (LangGraph checkpoints, see checkpoints.langgraph) ---------------------------
# A graph task's state is its LangGraph thread. Retry, forward and resume queue it and the graph
# runner continues from the latest LangGraph checkpoint; rollback forks: a copy of an earlier
# checkpoint (source "fork", parent = that checkpoint) becomes the latest, so the super-steps
# after it run again, and the checkpoints after it are left behind (superseded), not deleted.


def _graph_requeue(
    *,
    task: Task,
    user: AbstractBaseUser | None,
    kind: str,
    reason: str,
    revision: services.SpecRevision | None = None,
) -> Task:
    """Queue a stopped graph task to continue from its latest LangGraph checkpoint. Runs inside
    the caller's transaction with the task row locked."""
    actor = _actor(user)
    before = {"status": task.status}
    services.task_recovery_reset(task=task)
    services.event_record(
        task_id=task.id,
        type=kind,
        actor=actor,
        step_index=task.current_step,
        payload={"reason": reason, "resume": True, "graph": True, **_revision_fields(revision)},
    )
    task = services.task_transition(
        task_id=task.id,
        to=TaskStatus.QUEUED,
        actor=actor,
        reason=f"{kind}: {reason}"[:500],
        fields=_OUTCOME_CLEARED,
    )
    services.task_enqueue(task=task)
    services.audit_record(
        user=user,
        action=kind,
        task_id=task.id,
        reason=reason,
        before={**before, **_revision_audit(revision, "before")},
        after={"status": task.status, **_revision_audit(revision, "after")},
    )
    return task


def graph_rollback_preview(
    *, task: Task, checkpoint_id: str, workspace: bool = True
) -> dict[str, Any]:
    """What a rollback to this LangGraph checkpoint would do: the state it goes back to, the
    nodes that run next, the checkpoints it leaves behind and (with `workspace`) the files
    it writes back and deletes to restore the workspace snapshot stored with it."""
    listed = graph_checkpoints(task=task)
    chosen = next((c for c in listed if c["checkpoint_id"] == checkpoint_id), None)
    if chosen is None:
        raise RecoveryInvalid("checkpoint_id", "not a checkpoint of this task's graph")
    saver = DjangoCheckpointSaver(task_id=task.id)
    loaded = saver.get_tuple(_graph_config(task, checkpoint_id))
    values = {
        key: _short_json(value)
        for key, value in (loaded.checkpoint["channel_values"] if loaded else {}).items()
        if not key.startswith("branch:") and not key.startswith("__")
    }
    later = [c for c in listed if c["checkpoint_id"] > checkpoint_id and not c["superseded"]]
    preview = {
        "task_id": task.id,
        "task_status": task.status,
        "checkpoint_id": checkpoint_id,
        "step": chosen["step"],
        "source": chosen["source"],
        "allowed": not recovery_blocked(task),
        "blocked": recovery_blocked(task),
        "values": values,
        "superseded": [{"checkpoint_id": c["checkpoint_id"], "step": c["step"]} for c in later],
    }
    if workspace:
        snapshot = _graph_workspace_snapshot(task, checkpoint_id)
        files: dict[str, Any] = {"snapshot": snapshot is not None}
        if snapshot is not None:
            # The same plan the rollback's restore follows (snapshot_restore_plan).
            plan = snapshot_restore_plan(workspace=task.workspace_path, snapshot=snapshot)
            files |= {
                "files": snapshot["files"],
                "files_restored": plan.written[:200],
                "files_deleted": plan.deleted[:200],
                "links_deleted": plan.links[:200],
                "folders_deleted": plan.folders[:200],
                "folders_made": plan.made[:200],
                "modes_restored": plan.modes[:200],
            }
        preview["workspace"] = files
    return preview


def _graph_workspace_snapshot(task: Task, checkpoint_id: str) -> dict | None:
    """The workspace snapshot the graph runner stored with this checkpoint (None for one
    written before snapshots were taken, or by a graph run outside the harness)."""
    return (
        GraphWorkspace.objects.filter(task=task, checkpoint_id=checkpoint_id)
        .values_list("snapshot", flat=True)
        .first()
    )


def _graph_rollback(
    *,
    task: Task,
    checkpoint_id: str,
    user: AbstractBaseUser | None,
    reason: str,
    resume: bool,
) -> tuple[Task, dict | None]:
    """Fork the task's graph from an earlier checkpoint (LangGraph's checkpoint_id semantics:
    the copy's parent is that checkpoint, so the run continues from there). Inside the
    caller's transaction, task row locked. -> the task and the workspace snapshot the caller
    restores once this has committed (None: the checkpoint has none)."""
    preview = graph_rollback_preview(task=task, checkpoint_id=checkpoint_id, workspace=False)
    saver = DjangoCheckpointSaver(task_id=task.id)
    base = saver.get_tuple(_graph_config(task, checkpoint_id))
    step = int(base.metadata.get("step", 0))
    fork = {
        **base.checkpoint,
        "id": str(uuid6(clock_seq=step)),
        "ts": timezone.now().isoformat(),
    }
    metadata = {**base.metadata, "source": "fork", "step": step}
    # No new channel versions: the fork names the very blobs its base names.
    forked = saver.put(_graph_config(task, checkpoint_id), fork, metadata, {})
    # The workspace goes back with the graph: the snapshot stored with the checkpoint becomes
    # the fork's (the later ones are left behind with their checkpoints) and is restored once
    # this commits; the graph runner syncs a fork nothing has written against yet.
    snapshot = _graph_workspace_snapshot(task, checkpoint_id)
    restored = None
    if snapshot is not None:
        blocked = restore_blocked(task.workspace_path)
        if blocked:
            raise RecoveryConflict(f"the workspace cannot be restored ({blocked})")
        restored = snapshot_restore_plan(workspace=task.workspace_path, snapshot=snapshot)
        GraphWorkspace.objects.create(
            task=task,
            checkpoint_id=forked["configurable"]["checkpoint_id"],
            snapshot=snapshot,
            created_at=timezone.now(),
        )
    actor = _actor(user)
    services.task_recovery_reset(task=task, rollback=True, step=max(step, 0))
    history_superseded.send(
        sender=None, task_id=task.id, comment=f"superseded by rollback ({actor})"
    )
    services.event_record(
        task_id=task.id,
        type=EventType.ROLLBACK,
        actor=actor,
        step_index=max(step, 0),
        payload={
            "reason": reason,
            "resume": resume,
            "graph": True,
            "from_checkpoint": checkpoint_id,
            "from_step": step,
            "checkpoint_id": forked["configurable"]["checkpoint_id"],
            "superseded": len(preview["superseded"]),
            "workspace_restored": restored is not None,
            "files_restored": len(restored.written) if restored else 0,
            "files_deleted": len(restored.deleted) if restored else 0,
        },
    )
    target = TaskStatus.QUEUED if resume else TaskStatus.HELD
    before = {"status": task.status}
    task = services.task_transition(
        task_id=task.id,
        to=target,
        stay=True,
        actor=actor,
        reason=f"rollback: {reason}"[:500],
        fields=_OUTCOME_CLEARED,
    )
    services.audit_record(
        user=user,
        action="rollback",
        task_id=task.id,
        reason=reason,
        target=f"{task.id} graph checkpoint {checkpoint_id}",
        before=before,
        after={"status": task.status, "graph_checkpoint": forked["configurable"]["checkpoint_id"]},
    )
    return task, snapshot


def _graph_config(task: Task, checkpoint_id: str) -> dict[str, Any]:
    return {
        "configurable": {
            "thread_id": str(task.id),
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        }
    }


def _short_json(value: Any, limit: int = 2000) -> Any:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return json.loads(text) if len(text) <= limit else text[:limit] + "…"
