"""An operator's choice for a rollback's compensation that failed for good (the task stopped in
`compensation_failed`, agent.runtime.compensate): `retry` it (it runs again under its own
idempotency key), `mark_done` (the operator undid the effect by hand) or `skip` (the effect
stays in the world; the agent is told it could not be undone). Each is audited, and the task is
queued: its run takes up the compensations where they stopped."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from checkpoints.recovery.errors import RecoveryConflict, RecoveryInvalid
from checkpoints.recovery.guards import actor_of, newest_valid
from tasks import services
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.selectors import user_can_operate
from tasks.states import TaskStatus

COMPENSATION_DECISIONS = ("retry", "mark_done", "skip")
_TO = {
    "retry": ToolCallStatus.RETRY_WAIT,
    "mark_done": ToolCallStatus.SUCCEEDED,
    "skip": ToolCallStatus.REJECTED,
}


def compensation_decide(*, task_id: Any, user: User, decision: str, comment: str = "") -> Task:
    """Settle the failed compensation of a `compensation_failed` task and queue the task.
    Raises RecoveryInvalid (bad decision), RecoveryConflict (the task is not waiting for this,
    or the compensation is not failed any more); on either nothing changes."""
    if decision not in COMPENSATION_DECISIONS:
        raise RecoveryInvalid("decision", " | ".join(COMPENSATION_DECISIONS))
    if not user_can_operate(user):
        raise RecoveryConflict("only operators may decide a compensation")
    comment = (comment or "").strip()[:2000]
    actor = actor_of(user)
    with transaction.atomic():
        # Lock contract: the task row first, then the ledger row (as task_transition does).
        task = services.task_lock(task_id=task_id)
        if task.status != TaskStatus.COMPENSATION_FAILED:
            raise RecoveryConflict(f"the task is {task.status}, not compensation_failed")
        item = newest_valid(task).state.compensation_open()
        row = (
            ToolCall.objects.select_for_update().filter(task=task, call_id=item.call_id).first()
            if item is not None
            else None
        )
        if (
            item is None
            or row is None
            or row.status not in (ToolCallStatus.FAILED, ToolCallStatus.TIMED_OUT)
        ):
            raise RecoveryConflict("no failed compensation waits for a decision")
        effect = f"{item.original_tool} ({item.original_call_id})"
        before = {"task": task.status, "call": row.status, "attempts": row.attempts}
        fields: dict[str, Any] = {}
        if decision == "mark_done":
            fields = {
                "result": {"marked_done_by": actor, "comment": comment},
                "error_class": "",
                "error_message": "",
            }
        elif decision == "skip":
            fields = {
                "error_class": "skipped",
                "error_message": f"skipped by {actor}: the effect of {effect} stays"
                + (f" ({comment})" if comment else ""),
            }
        services.toolcall_transition(
            call=row, to=_TO[decision], now=timezone.now(), fields=fields, task_locked=True
        )
        services.event_record(
            task_id=task.id,
            type=EventType.COMPENSATION_DECIDED,
            actor=actor,
            step_index=task.current_step,
            payload={
                "decision": decision,
                "call_id": row.call_id,
                "tool": row.tool,
                "original_call_id": item.original_call_id,
                "original_tool": item.original_tool,
                "comment": comment,
            },
        )
        task = services.task_transition(
            task_id=task.id,
            to=TaskStatus.QUEUED,
            actor=actor,
            reason=f"compensation of {effect}: {decision}"[:500],
            expect_from=[TaskStatus.COMPENSATION_FAILED],
            fields={"error_class": "", "error_message": ""},
            locked=task,
        )
        services.audit_record(
            user=user,
            action=f"compensation_{decision}",
            task_id=task.id,
            target=f"{row.tool} {row.call_id} (undoes {effect})",
            reason=comment,
            before=before,
            after={"task": task.status, "call": row.status, "decision": decision},
        )
        services.task_enqueue(task=task, decided=True)
    return task
