"""The group rollback (`group_rollback`): every participant forked from its local checkpoint
(`_fork`), later tasks canceled, later global checkpoints superseded, in one transaction under
the group's row locks; then the files restored and the jobs sent."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from checkpoints.recovery import (
    RecoveryConflict,
    RecoveryInvalid,
    calls_rekey,
    live_call_ids,
    new_branch,
    restore_after_commit,
)
from checkpoints.recovery.compensating import (
    compensating_record,
    compensations_into,
    compensations_noted,
)
from checkpoints.selectors import calls_compensation, calls_undone
from checkpoints.services import checkpoint_build, checkpoint_fork_insert, checkpoint_next_seq
from checkpoints.snapshots import removed_paths, restore_blocked
from multiagent.models import GlobalCheckpoint, SharedRestorePending
from multiagent.recovery.plan import GroupPlan, Participant, group_blocked, group_plan
from multiagent.recovery.shared_restore import shared_restore_finish
from multiagent.selectors import group_lock
from review.services.cancel import reviews_cancel_pending
from review.services.outcomes import review_outcomes_recount
from review.services.standing_rules import standing_rules_distrust
from tasks import services
from tasks.agent_state import RecoveryNote
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.spec import DELEGATE_TOOL
from tasks.states import TERMINAL, TaskStatus

logger = logging.getLogger(__name__)


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
    planned, irreversible = calls_compensation(task=task, undone=undone)
    compensations = compensations_into(state, planned, resume=resume)
    actor = user.get_username() if user is not None and user.is_authenticated else "system"
    standing_rules_distrust(
        tool_call_ids=[r.pk for r in undone],
        cause="rolled_back",
        detail=f"group rollback by {actor}: {reason}"[:200],
    )
    review_outcomes_recount(task_id=task.id, live_call_ids=live_call_ids(state))
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
            "irreversible": [f"{r.tool} {r.call_id}" for r in irreversible][:100],
            "compensations": compensations_noted(compensations),
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
        versions=base.checkpoint.versions,
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
            "compensations": len(compensations),
        },
    )
    if compensations:
        compensating_record(task_id=task.id, actor=actor, state=state)
    if terminal_at_cut and task.status == p.status_at_cut and not compensations:
        return task.status
    # A participant with compensations is queued to run them (then held unless `resume`).
    target = (
        TaskStatus.QUEUED if (resume or compensations) and not terminal_at_cut else TaskStatus.HELD
    )
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
    user: User | None,
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
        blocked = group_blocked(members)
        if blocked:
            raise RecoveryConflict(blocked)
        plan = group_plan(members=members, global_checkpoint=global_checkpoint)
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
