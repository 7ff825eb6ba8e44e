"""A decided review closed with its record (review.services.drift_choices, unknown_outcome):
its status with who decided, a `review_decided` event, the audit entry `review_<decision>`
and the receipt, in the caller's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from review.models import ReviewRequest
from review.receipts import receipt_record
from review.services.transitions import review_transition
from tasks.events import EventType
from tasks.models import Task, ToolCall
from tasks.services import audit_record, event_build


def review_close_recorded(
    *,
    task: Task,
    review: ReviewRequest,
    call: ToolCall,
    user: User,
    to: str,
    decision: str,
    comment: str,
    now: datetime,
    via: str,
    fields: dict[str, Any],
    payload: dict[str, Any],
    before: Any,
    after: dict[str, Any],
    task_locked: bool = False,
) -> None:
    """`fields`: the review's besides who decided, the comment and the decision; `payload`:
    the event's besides the review, call, tool, decision and comment; `after`: the audit
    entry's besides the review's new status."""
    actor = user.get_username()
    review_transition(
        review=review,
        to=to,
        now=now,
        task_locked=task_locked,
        fields={"decided_by": user, "comment": comment, "decision_reason": decision, **fields},
        event=event_build(
            task_id=task.id,
            type=EventType.REVIEW_DECIDED,
            actor=actor,
            step_index=task.current_step,
            payload={
                "review_id": review.id,
                "call_id": call.call_id,
                "tool": review.tool,
                "decision": decision,
                "comment": comment,
                **payload,
            },
        ),
    )
    audit_record(
        user=user,
        action=f"review_{decision}",
        task_id=task.id,
        target=f"review {review.id}",
        reason=comment,
        before=before,
        after={"status": review.status, **after},
    )
    receipt_record(
        review=review, decision=decision, actor=actor, user=user, via=via, now=now, comment=comment
    )
