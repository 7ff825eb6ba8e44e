"""The fork every loop-task recovery writes (fork_checkpoint): the new head checkpoint, the
later ones superseded, the task moved, the event and audit entry; with what goes into it (the
spec revision of a retry, the workspace snapshot) and the restore of the files once it has
committed (restore_after_commit). checkpoints.fork's adoption of a branch forks the same way."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from checkpoints.models import Checkpoint
from checkpoints.recovery.errors import RecoveryInvalid
from checkpoints.recovery.guards import actor_of
from checkpoints.services import (
    LoadedCheckpoint,
    checkpoint_build,
    checkpoint_fork_insert,
    checkpoint_next_seq,
)
from checkpoints.snapshots import RestoreResult, snapshot_capture, snapshot_restore
from tasks import services
from tasks.agent_state import AgentState
from tasks.models import Task
from tasks.signals import history_superseded
from tasks.spec import RetryChanges
from tasks.states import TaskStatus

# Checkpoint triggers of a fork whose snapshot the workspace is restored to after the commit.
RESTORING_TRIGGERS = ("rollback", "group_rollback")

logger = logging.getLogger(__name__)


@dataclass
class RecoveryResult:
    task: Task
    kind: str
    # None for a graph task: its state is its LangGraph thread (checkpoints.recovery.graph).
    checkpoint: Checkpoint | None
    base: Checkpoint | None
    restored: RestoreResult | None
    superseded: int
    graph_checkpoint_id: str = ""
    # The snapshot a rollback restores after its commit.
    base_snapshot: dict[str, Any] | None = None
    # What a retry changed of the task's spec (budget, timeouts, model).
    revision: services.SpecRevision | None = None
    # Why `auto` chose this strategy (task_recover).
    why: str = ""


# A recovered task has no outcome yet: its result and error (and so its error fingerprint,
# which task_transition derives) are cleared with the move.
OUTCOME_CLEARED = {"error_class": "", "error_message": "", "result": ""}


def fork_checkpoint(
    *,
    task: Task,
    user: User | None,
    kind: str,
    reason: str,
    resume: bool,
    base: LoadedCheckpoint,
    state: AgentState,
    snapshot: dict[str, Any] | None,
    restored: RestoreResult | None = None,
    event: dict[str, Any] | None = None,
    enqueue: bool = True,
    revision: services.SpecRevision | None = None,
) -> RecoveryResult:
    """Write the forked checkpoint, supersede later ones, move the task, record it. Runs
    inside the caller's transaction, with the task row locked. `enqueue=False`: a resumed
    task is queued but its job is sent by the caller (after the files are restored).
    `revision`: what the operator changed of the spec, in the event and the audit entry."""
    actor = actor_of(user)
    seq = checkpoint_next_seq(task_id=task.id)
    checkpoint = checkpoint_build(
        task_id=task.id,
        seq=seq,
        state=state,
        level="task",
        trigger=kind,
        snapshot=snapshot,
        parent_id=base.checkpoint.id,
        # The state is the base's, made under the code its checkpoint names.
        versions=base.checkpoint.versions,
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
            **revision_fields(revision),
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
        fields=OUTCOME_CLEARED,
    )
    task.refresh_from_db()
    if resume and enqueue:
        services.task_enqueue(task=task, decided=True)
    services.audit_record(
        user=user,
        action=kind,
        task_id=task.id,
        reason=reason,
        target=f"{task.id} checkpoint {base.checkpoint.seq}",
        before={**before, **revision_audit(revision, "before")},
        after={
            "status": task.status,
            "head_checkpoint": str(checkpoint.id),
            "superseded": superseded,
            **revision_audit(revision, "after"),
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


def revision_fields(revision: services.SpecRevision | None) -> dict[str, Any]:
    """A recovery event's record of the spec changes that came with it."""
    if revision is None:
        return {}
    return {"spec_changes": {"before": revision.before, "after": revision.after}}


def revision_audit(revision: services.SpecRevision | None, side: str) -> dict[str, Any]:
    """The spec values a retry changed, as the audit entry's before / after show them."""
    return {} if revision is None else {"spec": getattr(revision, side)}


def spec_revise(task: Task, changes: RetryChanges | None) -> services.SpecRevision | None:
    """Apply a retry's spec changes (inside its transaction): bad values are RecoveryInvalid
    naming the field, and the transaction writes nothing."""
    if changes is None:
        return None
    try:
        return services.task_spec_revise(task=task, changes=changes)
    except services.SpecError as exc:
        raise RecoveryInvalid(exc.field, exc.message) from None


def workspace_snapshot(task: Task, newest: LoadedCheckpoint) -> dict[str, Any] | None:
    """The workspace as it is, where it lives on this machine; else the newest snapshot. A
    rollback's fork no run has continued from yet is its own snapshot: the files on disk may
    still be being restored to it, or a crash may have stopped that (the run syncs them)."""
    if newest.checkpoint.trigger in RESTORING_TRIGGERS or not task.workspace_path.is_dir():
        return newest.snapshot
    return snapshot_capture(workspace=task.workspace_path)


def restore_after_commit(
    restores: list[tuple[Any, Any, dict[str, Any] | None]], enqueue: list[Task]
) -> dict[Any, RestoreResult]:
    """Call once the recovery's transaction has committed, outside any transaction: restore
    each (key, directory, snapshot) — slow file I/O, with no row lock held — then send the
    jobs of the `enqueue` tasks, so no worker starts on a half-restored tree. A directory that
    cannot be restored is logged and left behind its head for the run to sync (see the
    docstring of checkpoints.recovery); the others go on. A failed commit never gets here, so
    it changes no file. -> {key: what was restored}."""
    done: dict[Any, RestoreResult] = {}
    for key, path, snapshot in restores:
        try:
            done[key] = snapshot_restore(workspace=path, snapshot=snapshot)
        except Exception:
            logger.exception("restoring %s after a recovery failed; its run syncs it", path)
    for task in enqueue:
        services.task_enqueue(task=task, decided=True)
    return done
