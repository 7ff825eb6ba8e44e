"""Settling a decided review: its ToolCall approved, answered or rejected, the review closed
with its event, audit entry and receipt, and the task requeued once its last pending review is
decided (task_resume_when_decided, which expiry and unknown outcomes use too)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from review.models import ReviewRequest, ReviewStatus
from review.receipts import receipt_record
from review.services.graph_interrupts import ANSWERED, graph_resume_value
from review.services.transitions import review_transition
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.feedback import compact_feedback
from tasks.models import Task, ToolCallStatus
from tasks.services import (
    audit_record,
    event_build,
    task_enqueue,
    task_review_outcome_count,
    task_transition,
    toolcall_transition,
)
from tasks.states import TaskStatus

# How a settled review reads, by its status: in the task's event and on its receipt.
_VERBS: dict[str, str] = {ReviewStatus.APPROVED: "approved", ReviewStatus.RESPONDED: "responded"}
_DECISIONS: dict[str, str] = {ReviewStatus.APPROVED: "approve", ReviewStatus.RESPONDED: "respond"}


def _rejection_feedback(*, tool: str, reason: str, comment: str) -> str:
    return compact_feedback(
        what=f"a reviewer rejected {tool}: {reason or comment or 'no reason given'}; "
        "it did not run",
        expected=f"what the reviewer asks: {comment or '(no comment)'}",
        check=f"do not repeat the same {tool} call; adapt the plan or finish",
    )


def review_settle(
    *,
    task: Task,
    review: ReviewRequest,
    user: User,
    status: str,
    comment: str,
    reason: str,
    approved: dict[str, Any] | None,
    now: datetime,
    via: str,
    response: Any = None,
    choice: str = "",
) -> ReviewRequest:
    """Close the review, settle its ToolCall, record the receipt, requeue the task. Caller
    holds both locks. `choice`: a version_drift review's decision (continue), named in the
    event, the audit entry and the receipt instead of approve."""
    actor = user.get_username()
    call = review.tool_call
    fields: dict[str, Any] = {
        "decided_by": user,
        "comment": comment,
        "decision_reason": reason[:200],
    }
    if review.interrupt is not None:
        fields["interrupt"] = {
            **review.interrupt,
            "decision": graph_resume_value(
                review=review,
                status=status,
                approved=approved,
                comment=comment or reason,
                response=response,
            ),
        }
    if status == ReviewStatus.APPROVED:
        toolcall_transition(
            call=call,
            task_locked=True,
            to=ToolCallStatus.APPROVED,
            fields={"arguments": approved, "arguments_hash": canonical_hash(approved)},
        )
    elif status == ReviewStatus.RESPONDED and (review.interrupt or {}).get("mode") in ANSWERED:
        # The response is the call's result: its tool never runs (a Pydantic AI external call,
        # a graph's tool call at a breakpoint). The runner hands it to the agent on resume.
        toolcall_transition(
            call=call,
            task_locked=True,
            to=ToolCallStatus.SUCCEEDED,
            now=now,
            fields={
                "arguments_hash": canonical_hash(call.arguments),
                "result": {"value": response, "answered_by": actor},
            },
        )
    elif status == ReviewStatus.RESPONDED:
        # A graph answered with a response goes on with it: a plain interrupt() returns it,
        # a middleware action gets it as its tool's answer. Not a rejection: the call ends
        # when the graph is resumed with it (agent.graph_runner settles it).
        toolcall_transition(
            call=call,
            task_locked=True,
            to=ToolCallStatus.APPROVED,
            fields={
                "arguments_hash": canonical_hash(call.arguments),
                "result": {"response": response},
            },
        )
    else:
        toolcall_transition(
            call=call,
            task_locked=True,
            to=ToolCallStatus.REJECTED,
            now=now,
            fields={
                "error_class": "rejected",
                "error_message": reason or comment or "rejected by a reviewer",
                "result": {
                    "observation": _rejection_feedback(
                        tool=review.tool, reason=reason, comment=comment
                    )
                },
            },
        )
    verb = _VERBS.get(status, "rejected")
    payload = decided_payload(
        review=review,
        call_id=call.call_id,
        status=status,
        comment=comment,
        reason=reason,
        approvers=list(review.approvals.values_list("user__username", flat=True)),
        approved=approved,
        now=now,
        choice=choice,
    )
    # The task says so once it ends ("succeeded · 1 call rejected").
    task_review_outcome_count(
        task_id=task.id, rejected=status == ReviewStatus.REJECTED, edited=payload["edited"]
    )
    review_transition(
        review=review,
        to=status,
        now=now,
        task_locked=True,
        fields=fields,
        event=event_build(
            task_id=task.id,
            type=EventType.REVIEW_DECIDED,
            payload=payload,
            actor=actor,
            step_index=task.current_step,
        ),
    )
    audit_record(
        **decided_audit(
            review=review,
            user=user,
            status=status,
            comment=comment,
            reason=reason,
            approved=approved,
            choice=choice,
        )
    )
    receipt_record(
        review=review,
        decision=choice or _DECISIONS.get(status, "reject"),
        actor=actor,
        user=user,
        via=via,
        now=now,
        comment=comment or reason,
    )
    task_resume_when_decided(
        task=task, review=review, reason=f"review {verb}: {review.tool}", actor=actor, now=now
    )
    return review


def decided_payload(
    *,
    review: ReviewRequest,
    call_id: str,
    status: str,
    comment: str,
    reason: str,
    approvers: list[str],
    approved: dict[str, Any] | None,
    now: datetime,
    choice: str = "",
) -> dict[str, Any]:
    """The `review_decided` event's payload of a settled review (review_settle, and a plain
    approval's one-statement write, approve_plain)."""
    return {
        "review_id": review.id,
        "call_id": call_id,
        "tool": review.tool,
        "decision": _VERBS.get(status, "rejected"),
        **({"kind": review.kind, "choice": choice} if choice else {}),
        "comment": comment,
        "reason": reason,
        "approvers": approvers,
        "original_arguments": review.original_arguments,
        "approved_arguments": approved,
        "edited": approved is not None and approved != review.original_arguments,
        "arguments_hash": canonical_hash(approved if approved is not None else review.arguments),
        "wait_s": round((now - review.requested_at).total_seconds(), 3),
    }


def decided_audit(
    *,
    review: ReviewRequest,
    user: User,
    status: str,
    comment: str,
    reason: str,
    approved: dict[str, Any] | None,
    choice: str = "",
) -> dict[str, Any]:
    """The audit entry of a settled review, as audit_record's (or audit_build's) arguments."""
    return {
        "user": user,
        "action": f"review_{choice or _DECISIONS.get(status, 'reject')}",
        "task_id": review.task_id,
        "target": f"review {review.id}",
        "reason": reason or comment,
        "before": {"arguments": review.original_arguments, "status": "pending"},
        "after": {"arguments": approved, "status": status, "comment": comment},
    }


def task_resume_when_decided(
    *, task: Task, review: ReviewRequest, reason: str, actor: str, now: datetime
) -> None:
    """Requeue the task once its last pending review is decided. Caller's transaction locked
    `task` (task_lock) and has not changed its status since."""
    # A graph may pause on several interrupts at once (one review each): it resumes with all
    # the answers, so the task waits until the last of them is decided. The caller holds the
    # task's lock, so of two concurrent last decisions exactly one sees none pending.
    if ReviewRequest.objects.filter(task_id=task.id, status=ReviewStatus.PENDING).exists():
        return
    # The time the task waited (review_wait_s) is the state machine's to add up.
    task = task_transition(
        task_id=task.id,
        to=TaskStatus.QUEUED,
        reason=reason,
        actor=actor,
        expect_from=[TaskStatus.WAITING_REVIEW],
        locked=task,
    )
    task_enqueue(task=task, decided=True)
