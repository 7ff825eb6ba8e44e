"""Expiry, called by the periodic sweep: a pending review past its deadline expires and its
`on_expiry` action applies (the call rejected and the task resumed, or the task failed)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from review.models import ReceiptVia, ReviewRequest, ReviewStatus
from review.receipts import receipt_record
from review.services.graph_interrupts import graph_resume_value
from review.services.settle import task_resume_when_decided
from review.services.transitions import review_transition
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.feedback import compact_feedback
from tasks.models import Task, ToolCallStatus
from tasks.services import (
    audit_record,
    event_build,
    task_lock,
    task_transition,
    toolcall_transition,
)
from tasks.states import TaskStatus, toolcall_can_transition


def _expiry_feedback(*, tool: str) -> str:
    return compact_feedback(
        what=f"the review of {tool} expired before anyone decided; it did not run",
        expected="an approach that does not depend on this call",
        check=f"do not repeat the same {tool} call unless it is essential; say so in the answer",
    )


def reviews_expire_overdue(*, now: datetime | None = None) -> int:
    """Expire every pending review past its deadline and apply its `on_expiry` action:
    `reject` settles the call with "expired" feedback and resumes the task (the model adapts);
    `fail_task` fails the task with error_class `review_expired`. Returns how many expired."""
    now = now or timezone.now()
    overdue = list(
        ReviewRequest.objects.filter(status=ReviewStatus.PENDING, expires_at__lte=now)
        .order_by("expires_at")
        .values_list("id", "task_id")
    )
    expired = 0
    for review_id, task_id in overdue:
        with transaction.atomic():
            task = task_lock(task_id=task_id)
            review = ReviewRequest.objects.select_for_update().get(id=review_id)
            if review.status != ReviewStatus.PENDING:
                continue  # decided while we were getting here
            _expire(task=task, review=review, now=now)
            expired += 1
    return expired


def _expire(*, task: Task, review: ReviewRequest, now: datetime) -> None:
    call = review.tool_call
    feedback = _expiry_feedback(tool=review.tool)
    if toolcall_can_transition(call.status, ToolCallStatus.REJECTED):
        toolcall_transition(
            call=call,
            to=ToolCallStatus.REJECTED,
            now=now,
            fields={
                "error_class": "review_expired",
                "error_message": "the review expired before a decision",
                "result": {"observation": feedback},
            },
        )
    fields: dict[str, Any] = {}
    if review.interrupt is not None:
        fields["interrupt"] = {
            **review.interrupt,
            "decision": graph_resume_value(
                review=review, status=ReviewStatus.EXPIRED, approved=None, comment="", response=None
            ),
        }
    review_transition(
        review=review,
        to=ReviewStatus.EXPIRED,
        now=now,
        fields=fields,
        event=event_build(
            task_id=task.id,
            type=EventType.REVIEW_EXPIRED,
            step_index=task.current_step,
            payload={
                "review_id": review.id,
                "call_id": call.call_id,
                "tool": review.tool,
                "on_expiry": review.on_expiry,
                "expires_at": review.expires_at.isoformat() if review.expires_at else None,
                "arguments_hash": canonical_hash(review.arguments),
                "wait_s": round((now - review.requested_at).total_seconds(), 3),
            },
        ),
    )
    audit_record(
        user=None,
        action="review_expire",
        task_id=task.id,
        target=f"review {review.id}",
        reason=f"on_expiry={review.on_expiry}",
        before={"status": "pending"},
        after={"status": ReviewStatus.EXPIRED},
    )
    receipt_record(
        review=review,
        decision="expire",
        actor="system:sweep",
        via=ReceiptVia.SWEEP,
        now=now,
        comment=f"on_expiry={review.on_expiry}",
    )
    if task.status != TaskStatus.WAITING_REVIEW:
        return
    if review.on_expiry == "fail_task":
        task_transition(
            task_id=task.id,
            to=TaskStatus.FAILED,
            reason=f"review of {review.tool} expired",
            expect_from=[TaskStatus.WAITING_REVIEW],
            fields={
                "error_class": "review_expired",
                "error_message": f"the review of {review.tool} (review {review.id}) "
                "expired before anyone decided",
            },
        )
        return
    task_resume_when_decided(
        task=task, review=review, reason=f"review expired: {review.tool}", actor="", now=now
    )
