"""Deciding a review of kind `unknown_outcome` (review.services.gates opens it): a
non-idempotent call whose outcome is unknown is marked done, run again or fails the task."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from review.models import ReceiptVia, ReviewRequest, ReviewStatus
from review.selectors.access import user_can_decide
from review.services.approvals import approval_add, approver_check, decision_check_open
from review.services.closing import review_close_recorded
from review.services.errors import ReviewForbidden, ReviewInvalid
from review.services.settle import task_resume_when_decided
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.services import (
    task_lock,
    task_transition,
    toolcall_transition,
)
from tasks.states import TaskStatus

UNKNOWN_OUTCOME = "unknown_outcome"
UNKNOWN_OUTCOME_DECISIONS = ("mark_done", "rerun", "fail_task")
UNKNOWN_OUTCOME_HINT = (
    "the call's outcome is unknown: decide mark_done (it took effect), "
    "rerun (run it again, same idempotency key) or fail_task"
)


def review_resolve_unknown_outcome(
    *,
    review_id: Any,
    user: User,
    decision: str,
    arguments_hash: str | None = None,
    result: Any = None,
    comment: str = "",
    via: str = ReceiptVia.API,
) -> ReviewRequest:
    """Settle a non-idempotent call whose worker died while it ran (the loop opened a review
    of kind `unknown_outcome` rather than re-run it blindly):

    - `mark_done`: the operator checked that it took effect; it is recorded as succeeded with
      `result` (default: a note naming the operator) and the task resumes from there;
    - `rerun`: it runs again, with the same call_id as its idempotency key, when the task
      resumes. Running it again is approving it again: the decision must carry the
      `arguments_hash` of the call (missing is ReviewInvalid, stale ReviewConflict) and is
      held to what its first run needed (`approvals_required` distinct operators, the
      creator ban; review.services.gates): until enough operators approved, each re-run
      approval is recorded and the review stays pending;
    - `fail_task`: the task fails with error class `unknown_outcome`.

    `mark_done` and `fail_task` run nothing, so one operator decides them. Every decision is
    in the audit log with who decided, what and the arguments hash of the call.

    Raises ReviewForbidden, ReviewConflict or ReviewInvalid; on any of them nothing changes."""
    if decision not in UNKNOWN_OUTCOME_DECISIONS:
        raise ReviewInvalid(
            UNKNOWN_OUTCOME_HINT,
            errors=[{"field": "decision", "message": " | ".join(UNKNOWN_OUTCOME_DECISIONS)}],
        )
    if not user_can_decide(user):
        raise ReviewForbidden("only operators may decide reviews")
    if decision == "rerun" and not arguments_hash:
        raise ReviewInvalid(
            "a re-run must name the arguments it runs again",
            errors=[
                {
                    "field": "arguments_hash",
                    "message": "required: the arguments_hash of the arguments you were shown",
                }
            ],
        )
    task_id = ReviewRequest.objects.values_list("task_id", flat=True).get(id=review_id)
    actor = user.get_username()
    with transaction.atomic():
        task = task_lock(task_id=task_id)
        review = ReviewRequest.objects.select_for_update().get(id=review_id)
        if review.kind != UNKNOWN_OUTCOME:
            raise ReviewInvalid(
                f"{decision} applies to calls whose outcome is unknown; "
                "decide this review with approve or reject",
                errors=[{"field": "decision", "message": "approve | reject"}],
            )
        now = decision_check_open(review=review, task=task, seen_hash=arguments_hash)
        call = review.tool_call
        call_hash = canonical_hash(call.arguments)
        before = {"status": review.status, "call": call.status, "arguments_hash": call_hash}
        if decision == "rerun":
            approver_check(
                review=review, task=task, user=user, act="run its calls again", what="this re-run"
            )
            if not approval_add(
                task=task,
                review=review,
                user=user,
                arguments_hash=call_hash,
                comment=comment,
                now=now,
                via=via,
                decision="rerun",
                event={"kind": UNKNOWN_OUTCOME, "decision": decision},
                before=before,
                after={"decision": decision, "arguments_hash": call_hash},
            ):
                return review
            toolcall_transition(
                call=call, to=ToolCallStatus.APPROVED, fields={"arguments_hash": call_hash}
            )
        elif decision == "mark_done":
            toolcall_transition(
                call=call,
                to=ToolCallStatus.SUCCEEDED,
                now=now,
                fields={
                    "result": (
                        result
                        if result is not None
                        else {"marked_done_by": actor, "comment": comment}
                    ),
                    "error_class": "",
                    "error_message": "",
                },
            )
        _resolution_record(
            task=task,
            review=review,
            call=call,
            user=user,
            decision=decision,
            comment=comment,
            call_hash=call_hash,
            before=before,
            now=now,
            via=via,
        )
        if decision == "fail_task":
            task_transition(
                task_id=task.id,
                to=TaskStatus.FAILED,
                actor=actor,
                reason=f"outcome of {review.tool} unknown: failed by {actor}",
                expect_from=[TaskStatus.WAITING_REVIEW],
                fields={
                    "error_class": UNKNOWN_OUTCOME,
                    "error_message": comment
                    or f"the outcome of {review.tool} ({call.call_id}) is unknown",
                },
            )
        else:
            task_resume_when_decided(
                task=task,
                review=review,
                actor=actor,
                now=now,
                reason=f"outcome of {review.tool} unknown: {decision}",
            )
    return review


def _resolution_record(
    *,
    task: Task,
    review: ReviewRequest,
    call: ToolCall,
    user: User,
    decision: str,
    comment: str,
    call_hash: str,
    before: dict[str, Any],
    now: datetime,
    via: str,
) -> None:
    """The resolution closes the review (approved, or rejected for fail_task) with its event,
    audit entry and receipt, naming every approver. Caller holds both locks."""
    approvers = list(review.approvals.values_list("user__username", flat=True))
    review_close_recorded(
        task=task,
        review=review,
        call=call,
        user=user,
        to=ReviewStatus.REJECTED if decision == "fail_task" else ReviewStatus.APPROVED,
        decision=decision,
        comment=comment,
        now=now,
        via=via,
        fields={},
        payload={"kind": UNKNOWN_OUTCOME, "approvers": approvers, "arguments_hash": call_hash},
        before=before,
        after={
            "call": call.status,
            "decision": decision,
            "arguments_hash": call_hash,
            "approvers": approvers,
        },
    )
