"""Group recovery: roll a whole group back to a global checkpoint, all or nothing.

Every participant of the cut gets its workspace and AgentState back from its local checkpoint
(a new `group_rollback` checkpoint, parent = that local checkpoint, becomes its head; its later
checkpoints are superseded); later global checkpoints are superseded; tasks started after the
cut are canceled. Delegations open at the cut stay bound to the same children (they are rolled
back too), so the parent waits for them again instead of starting new ones.

The group's shared directory (multiagent/shared.py) goes back to the snapshot the cut recorded
(GlobalCheckpoint.shared_snapshot), with the workspaces. Its restore is recorded as pending in
the rollback's transaction (SharedRestorePending) and the record dropped once it is done: a
crash or an I/O error after the commit leaves it pending, and the next run of a participant
finishes it before its first step, or the sweep does (shared_restore_finish).

All or nothing: every local checkpoint is decoded and verified and every blob its snapshot (and
the shared directory's) needs is looked up before anything changes; the database changes are
one transaction, and no file changes before it commits. Then, with no row lock held, the
shared directory and the workspaces are restored, and only then are the resumed participants'
jobs sent (checkpoints.recovery.restore_after_commit). A failed commit changes no file; a crash
or an I/O error after it leaves a workspace behind its head (a `group_rollback` fork), which
the participant's run syncs on start.

Lock contract: the group's task rows in id order (multiagent.selectors.group_lock), then
checkpoint rows. Refused (409) while any participant runs, is queued, or a round is open.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.models import Checkpoint
from checkpoints.recovery import (
    RecoveryConflict,
    RecoveryInvalid,
    calls_rekey,
    new_branch,
    restore_after_commit,
)
from checkpoints.selectors import calls_undone
from checkpoints.services import (
    CheckpointCorrupted,
    LoadedCheckpoint,
    checkpoint_build,
    checkpoint_decode,
    checkpoint_fork_insert,
    checkpoint_next_seq,
)
from checkpoints.snapshots import (
    RestoreResult,
    removed_paths,
    restore_blocked,
    snapshot_blob_keys,
    snapshot_manifest,
    snapshot_restore,
    snapshot_restore_plan,
)
from multiagent.models import GlobalCheckpoint, SharedRestorePending
from multiagent.selectors import group_lock, group_member_ids
from multiagent.shared import shared_path
from review.services.cancel import reviews_cancel_pending
from review.services.standing_rules import standing_rules_distrust
from tasks import services
from tasks.agent_state import RecoveryNote
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.spec import DELEGATE_TOOL
from tasks.states import TERMINAL, TaskStatus

logger = logging.getLogger(__name__)

_BLOCKING = {
    TaskStatus.RUNNING: "is running",
    TaskStatus.QUEUED: "is queued and a worker may take it at any moment",
    TaskStatus.PREPARED: "is held by a global checkpoint round",
    TaskStatus.PENDING: "has not started",
}


@dataclass
class Participant:
    task: Task
    loaded: LoadedCheckpoint
    status_at_cut: str
    # What restoring its workspace writes back and removes (the restore after the commit
    # follows the same computation: checkpoints.snapshots.snapshot_restore_plan).
    files: RestoreResult


@dataclass
class SharedRestore:
    """The group's shared directory going back to the cut."""

    path: Path
    snapshot: dict
    files: RestoreResult


@dataclass
class GroupPlan:
    global_checkpoint: GlobalCheckpoint
    participants: list[Participant]
    # Tasks of the group started after the cut: canceled by the rollback.
    later_tasks: list[Task]
    blocked: str
    shared: SharedRestore | None = None

    def restores(self, *, shared: bool = True) -> list[tuple[str, Path, dict]]:
        """(what, directory, snapshot) for every directory the rollback restores (without the
        shared directory: `shared=False`)."""
        out = (
            [("the shared directory", self.shared.path, self.shared.snapshot)]
            if self.shared and shared
            else []
        )
        return out + [
            (f"the workspace of task {p.task.id}", p.task.workspace_path, p.loaded.snapshot)
            for p in self.participants
        ]


def _shared_plan(global_checkpoint: GlobalCheckpoint) -> SharedRestore | None:
    """Verify the cut's shared directory snapshot; RecoveryInvalid when it cannot be restored."""
    snapshot = global_checkpoint.shared_snapshot
    if snapshot is None:
        return None
    try:
        missing = blob_store().missing(snapshot_blob_keys(snapshot))
        snapshot_manifest(snapshot)  # readable, every chunk verified
    except (BlobMissing, BlobCorrupted, KeyError, ValueError) as exc:
        raise RecoveryInvalid(
            "global_checkpoint_id", f"the shared directory cannot be restored: {exc}"
        ) from None
    if missing:
        raise RecoveryInvalid(
            "global_checkpoint_id",
            f"the shared directory cannot be restored: {len(missing)} snapshot blob(s) are missing",
        )
    path = shared_path(root_id=global_checkpoint.root_id)
    return SharedRestore(
        path=path, snapshot=snapshot, files=snapshot_restore_plan(workspace=path, snapshot=snapshot)
    )


def _blocked(members: list[Task]) -> str:
    for task in members:
        if task.hold_round_id is not None:
            return f"task {task.id} is held by a global checkpoint round in progress"
        if task.status in _BLOCKING:
            return f"task {task.id} ({task.agent_name or task.title}) {_BLOCKING[task.status]}"
    return ""


def _plan(*, members: list[Task], global_checkpoint: GlobalCheckpoint) -> GroupPlan:
    """Load and verify every participant's local checkpoint and the blobs its snapshot needs.
    Raises RecoveryInvalid naming the participant that cannot be restored."""
    by_id = {str(t.id): t for t in members}
    store = blob_store()
    participants = []
    for entry in global_checkpoint.participants:
        task = by_id.get(entry["task_id"])
        checkpoint = Checkpoint.objects.filter(
            id=entry["checkpoint_id"], task_id=entry["task_id"]
        ).first()
        if task is None or checkpoint is None:
            raise RecoveryInvalid(
                "global_checkpoint_id",
                f"participant {entry['task_id']} cannot be restored: its checkpoint is gone",
            )
        try:
            loaded = checkpoint_decode(checkpoint)
            missing = store.missing(snapshot_blob_keys(loaded.snapshot))
        except (CheckpointCorrupted, KeyError, ValueError) as exc:
            raise RecoveryInvalid(
                "global_checkpoint_id",
                f"participant {task.id} ({task.agent_name or task.title}) cannot be restored: "
                f"{exc}",
            ) from None
        if missing:
            raise RecoveryInvalid(
                "global_checkpoint_id",
                f"participant {task.id} cannot be restored: {len(missing)} snapshot blob(s) "
                "are missing",
            )
        participants.append(
            Participant(
                task=task,
                loaded=loaded,
                status_at_cut=entry.get("status", ""),
                files=snapshot_restore_plan(
                    workspace=task.workspace_path, snapshot=loaded.snapshot
                ),
            )
        )
    in_cut = {p.task.id for p in participants}
    later = [
        t for t in members if t.id not in in_cut and t.created_at > global_checkpoint.created_at
    ]
    return GroupPlan(
        global_checkpoint=global_checkpoint,
        participants=participants,
        later_tasks=later,
        blocked=_blocked(members),
        shared=_shared_plan(global_checkpoint),
    )


def group_rollback_preview(*, root: Task, global_checkpoint: GlobalCheckpoint) -> dict[str, Any]:
    """What rolling the group back would do, per agent, computed without changing anything."""
    members = list(Task.objects.filter(id__in=group_member_ids(root_id=root.id)).order_by("id"))
    try:
        plan = _plan(members=members, global_checkpoint=global_checkpoint)
    except RecoveryInvalid as exc:
        return {
            "global_checkpoint_id": global_checkpoint.id,
            "seq": global_checkpoint.seq,
            "allowed": False,
            "blocked": exc.message,
            "participants": [],
            "shared": None,
            "canceled": [],
            "superseded_global_seqs": [],
        }
    return {
        "global_checkpoint_id": global_checkpoint.id,
        "seq": global_checkpoint.seq,
        "allowed": not plan.blocked,
        "blocked": plan.blocked,
        "participants": [
            {
                "task_id": p.task.id,
                "agent": p.task.agent_name,
                "title": p.task.title,
                "status": p.task.status,
                "status_at_cut": p.status_at_cut,
                "checkpoint_id": p.loaded.checkpoint.id,
                "checkpoint_seq": p.loaded.checkpoint.seq,
                "step_index": p.loaded.checkpoint.step_index,
                "files_restore": p.files.written,
                "files_delete": p.files.deleted,
                "links_delete": p.files.links,
                "folders_delete": p.files.folders,
                "calls_undone": [
                    {"call_id": r.call_id, "tool": r.tool, "step_index": r.step_index}
                    for r in calls_undone(p.task, p.loaded)
                ],
                "checkpoints_superseded": Checkpoint.objects.filter(
                    task=p.task, seq__gt=p.loaded.checkpoint.seq, superseded=False
                ).count(),
            }
            for p in plan.participants
        ],
        # The shared directory's changes (None: the group has none, or the cut predates it).
        "shared": {
            "files_restore": plan.shared.files.written,
            "files_delete": plan.shared.files.deleted,
            "links_delete": plan.shared.files.links,
            "folders_delete": plan.shared.files.folders,
        }
        if plan.shared
        else None,
        "canceled": [t.id for t in plan.later_tasks if t.status not in TERMINAL],
        "superseded_global_seqs": list(
            GlobalCheckpoint.objects.filter(
                root=root, seq__gt=global_checkpoint.seq, superseded=False
            ).values_list("seq", flat=True)
        ),
    }


def _fork(p: Participant, *, plan: GroupPlan, user: Any, reason: str, resume: bool) -> str:
    """Write the participant's `group_rollback` checkpoint and move it; -> its new status (a
    queued participant's job is sent by the caller, once the files are restored)."""
    task, base = p.task, p.loaded
    state = base.state.model_copy(deep=True)
    # Delegate calls open at the cut stay bound to their children (rolled back with the
    # group); other unfinished calls run again under fresh call_ids on a new branch.
    pending = state.pending[state.next_call :]
    open_delegations = {c.call_id for c in pending if c.tool == DELEGATE_TOOL}
    state.branch = new_branch(task, state)
    calls_rekey(state, {c.call_id for c in pending} - open_delegations)
    undone = calls_undone(task, base)
    actor = user.get_username() if user is not None and user.is_authenticated else "system"
    standing_rules_distrust(
        tool_call_ids=[r.pk for r in undone],
        cause="rolled_back",
        detail=f"group rollback by {actor}: {reason}"[:200],
    )
    state.recovery = RecoveryNote(
        kind="rollback",
        reason=reason,
        actor=actor,
        from_seq=base.checkpoint.seq,
        undone={
            "files_restored": p.files.written[:200],
            "files_deleted": removed_paths(p.files)[:200],
            "calls": [f"{r.tool} {r.call_id} (step {r.step_index})" for r in undone][:100],
            "group": f"global checkpoint {plan.global_checkpoint.seq}",
        },
    )
    state.last_error = None
    seq = checkpoint_next_seq(task_id=task.id)
    checkpoint = checkpoint_build(
        task_id=task.id,
        seq=seq,
        state=state,
        level="task",
        trigger="group_rollback",
        snapshot=base.snapshot,
        parent_id=base.checkpoint.id,
    )
    superseded = checkpoint_fork_insert(checkpoint=checkpoint, base_seq=base.checkpoint.seq)
    if open_delegations:
        # The children are back at the cut too: the calls that started them wait again.
        started = Task.objects.filter(parent=task, parent_call_id__in=open_delegations).values_list(
            "parent_call_id", flat=True
        )
        for row in ToolCall.objects.filter(task=task, call_id__in=list(started)):
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.RUNNING,
                fields={
                    "result": None,
                    "error_class": "",
                    "error_message": "",
                    "started_at": row.started_at,
                },
            )
    terminal_at_cut = p.status_at_cut in TERMINAL
    services.task_fork_head(task=task, checkpoint_id=checkpoint.id, state=state, rollback=True)
    reviews_cancel_pending(task_id=task.id, comment=f"superseded by group rollback ({actor})")
    services.event_record(
        task_id=task.id,
        type=EventType.GROUP_ROLLBACK,
        actor=actor,
        step_index=state.step_index,
        payload={
            "reason": reason,
            "resume": resume,
            "global_checkpoint_id": str(plan.global_checkpoint.id),
            "global_seq": plan.global_checkpoint.seq,
            "from_checkpoint": str(base.checkpoint.id),
            "from_seq": base.checkpoint.seq,
            "checkpoint_id": str(checkpoint.id),
            "seq": seq,
            "superseded": superseded,
            "files_restored": len(p.files.written),
            "files_deleted": len(removed_paths(p.files)),
        },
    )
    if terminal_at_cut and task.status == p.status_at_cut:
        return task.status
    target = TaskStatus.QUEUED if resume and not terminal_at_cut else TaskStatus.HELD
    # The outcome goes with the status (and the error fingerprint with the error): cleared
    # unless the task had already ended at the cut.
    task = services.task_transition(
        task_id=task.id,
        to=target,
        stay=True,
        actor=actor,
        reason=f"group rollback: {reason}"[:500],
        fields={} if terminal_at_cut else {"error_class": "", "error_message": "", "result": ""},
    )
    return target


def group_rollback(
    *,
    root_id: Any,
    global_checkpoint_id: Any,
    user: AbstractBaseUser | None,
    reason: str,
    resume: bool,
) -> dict[str, Any]:
    """Roll every participant of the group back to the global checkpoint, or none."""
    reason = (reason or "").strip()[:2000]
    if not reason:
        raise RecoveryInvalid("reason", "a reason is required")
    with transaction.atomic():
        members = group_lock(root_id=root_id)
        global_checkpoint = GlobalCheckpoint.objects.filter(
            root_id=root_id, id=global_checkpoint_id
        ).first()
        if global_checkpoint is None:
            raise RecoveryInvalid("global_checkpoint_id", "no such global checkpoint in this group")
        if global_checkpoint.superseded:
            raise RecoveryInvalid(
                "global_checkpoint_id", "this global checkpoint was superseded by a rollback"
            )
        blocked = _blocked(members)
        if blocked:
            raise RecoveryConflict(blocked)
        plan = _plan(members=members, global_checkpoint=global_checkpoint)
        for what, path, _snapshot in plan.restores():
            why = restore_blocked(path)
            if why:
                raise RecoveryConflict(f"{what} could not be restored ({why}); nothing was changed")
        statuses = {
            str(p.task.id): _fork(p, plan=plan, user=user, reason=reason, resume=resume)
            for p in plan.participants
        }
        canceled = []
        for task in plan.later_tasks:
            if task.status in TERMINAL:
                continue
            services.task_transition(
                task_id=task.id,
                to=TaskStatus.CANCELED,
                reason="started after the global checkpoint the group was rolled back to",
                fields={"error_class": "canceled", "error_message": "group rollback"},
            )
            reviews_cancel_pending(task_id=task.id, comment="group rollback")
            canceled.append(str(task.id))
        later = GlobalCheckpoint.objects.filter(
            root_id=root_id, seq__gt=global_checkpoint.seq, superseded=False
        ).update(superseded=True)
        services.audit_record(
            user=user,
            action="group_rollback",
            task_id=root_id,
            reason=reason,
            target=f"{root_id} global checkpoint {global_checkpoint.seq}",
            after={
                "statuses": statuses,
                "canceled": canceled,
                "global_superseded": later,
            },
        )
        if plan.shared:
            SharedRestorePending.objects.update_or_create(
                root_id=root_id,
                defaults={"global_checkpoint": global_checkpoint, "created_at": timezone.now()},
            )
        queued = [t for t, status in statuses.items() if status == TaskStatus.QUEUED]
        enqueue = list(Task.objects.filter(id__in=queued))
    # Committed: now the files, with no lock on the group held, then the jobs.
    if plan.shared:
        try:
            shared_restore_finish(root_id=root_id)
        except Exception:
            logger.exception(
                "restoring the shared directory of group %s failed; its participants' runs "
                "or the sweep finish it",
                root_id,
            )
    restore_after_commit(plan.restores(shared=False), enqueue)
    return {
        "global_checkpoint_id": global_checkpoint.id,
        "seq": global_checkpoint.seq,
        "participants": [
            {"task_id": task_id, "status": status} for task_id, status in statuses.items()
        ],
        "canceled": canceled,
        "global_checkpoints_superseded": later,
    }


def shared_restore_finish(*, root_id: Any) -> bool:
    """Restore the group's shared directory to the cut of the group rollback that left it
    pending, then drop the pending record, under that record's row lock: two finishers never
    restore at once, and a participant's run, which calls this before its first step, never
    writes the directory before it is back. -> whether a restore was pending. What the restore
    raises propagates, and the record stays for the next try."""
    with transaction.atomic():
        pending = (
            SharedRestorePending.objects.select_for_update()
            .select_related("global_checkpoint")
            .filter(root_id=root_id)
            .first()
        )
        if pending is None:
            return False
        snapshot_restore(
            workspace=shared_path(root_id=root_id),
            snapshot=pending.global_checkpoint.shared_snapshot,
        )
        pending.delete()
    return True


def shared_restores_finish_pending() -> int:
    """The sweep's step: finish every pending shared-directory restore; -> how many it did. One
    that fails is logged and left for the next sweep."""
    done = 0
    for root_id in list(SharedRestorePending.objects.values_list("root_id", flat=True)):
        try:
            done += shared_restore_finish(root_id=root_id)
        except Exception:
            logger.exception(
                "restoring the shared directory of group %s failed; the next sweep tries again",
                root_id,
            )
    return done
