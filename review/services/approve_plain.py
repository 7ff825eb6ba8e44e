"""A plain approval in a handful of statements (issue #48): the one operator's approval of a
policy review's call as proposed, the only approval it needs. It is what most decisions are,
and an operator waits for it, then the task for its worker.

The same decision review_decide makes (its checks, in its order; the same rows: the approval,
the call approved, the review closed with its `review_decided` event, notifications, roll-up
mark and wait metric, the audit entry, the receipt on the chain, the task requeued with its
`status` event and its job enqueued on commit), written as review_settle writes it, in five
statements instead of about thirty:

1. the task row locked, found by the review (task_lock's lock, taken first);
2. the review row locked, with what the decision reads besides: the call's id and status,
   whether anyone approved it before, other pending reviews of the task, notifications due
   only while it is pending, when the task started waiting;
3. the review roll-up lock and the receipt chain head, locked in that order (review_transition
   then receipt_record take them in that order), the head's seq and hash read;
4. every row written in one statement (tasks.services.locked_write);
5. the commit.

Anything else — an edit, a remembered rule, a second approval needed or already given, an
interrupt, another kind of review — is review_decide's own path; so is a review this finds
not plain once locked (nothing written: the locks go with the empty transaction)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction

from review.models import (
    REVIEW_TRANSITIONS,
    ReviewApproval,
    ReviewRequest,
    ReviewRolledHour,
    ReviewStatus,
)
from review.notifications import notifications_plan_closed, review_route
from review.receipts import receipt_build, receipt_link
from review.services.approvals import creator_check, decision_check_open
from review.services.plain_reads import (
    plain_global_locks,
    plain_review_locked,
    plain_task_locked,
)
from review.services.reopen import target_check
from review.services.settle import decided_audit, decided_payload
from review.services.transitions import review_wait_count
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import Task, TaskEvent, ToolCallStatus
from tasks.rollups import hour_floor
from tasks.services import (
    audit_build,
    event_build,
    task_enqueue,
    task_job_id_new,
    toolcall_transition,
)
from tasks.services.locked_write import rows_write
from tasks.services.task_transitions import task_requeue_decided_build
from tasks.states import IllegalTransition

# The review kind a person's policy pause opens (not a graph's interrupt, an unknown outcome,
# a version drift, a plan or a standing rule's allowance).
POLICY = "policy"


def review_approve_plain(
    *,
    review_id: Any,
    user: User,
    arguments_hash: str,
    target_hash: str | None,
    comment: str,
    reason: str,
    via: str,
) -> ReviewRequest | None:
    """review_decide's approval of the call as proposed, when it is plain (see the module);
    None, having written nothing, when it is not: the caller decides it the general way.
    Raises what review_decide raises, for the same reasons."""
    if connection.vendor != "postgresql":  # the statements below are PostgreSQL's
        return None
    actor = user.get_username()
    with transaction.atomic():
        task = plain_task_locked(review_id=review_id)
        review = plain_review_locked(review_id=review_id) if task is not None else None
        if task is None or review is None or not _plain(review):
            return None
        review.task = task  # the row just locked: what the target check and the decision read
        reopened = target_check(review=review, target_hash=target_hash, actor=actor)
        if reopened is None:
            now = decision_check_open(review=review, task=task, seen_hash=arguments_hash)
            creator_check(review=review, task=task, user=user, act="approve its calls")
            _approve(
                task=task,
                review=review,
                user=user,
                comment=comment,
                reason=reason,
                now=now,
                via=via,
            )
            return review
    # The reopened review commits with this transaction; the decision is refused.
    raise reopened


def _plain(review: ReviewRequest) -> bool:
    return (
        review.kind == POLICY
        and review.interrupt is None
        and review.edited_arguments is None
        and review.approvals_required <= 1
        and not _read(review, "approved_before")
        and review.tool_call_id is not None
    )


def _read(review: ReviewRequest, name: str) -> Any:
    """A column statement 2 reads besides the review's own (`plain_<name>`)."""
    return getattr(review, f"plain_{name}")


def _approve(
    *,
    task: Task,
    review: ReviewRequest,
    user: User,
    comment: str,
    reason: str,
    now: datetime,
    via: str,
) -> None:
    """The approval settles the review (as _approve then review_settle in decide and settle);
    the caller holds the task's and the review's locks."""
    actor = user.get_username()
    approved = review.original_arguments
    approved_hash = canonical_hash(approved)
    call = review.tool_call  # read by statement 2
    # An approval derives no field of the call's besides its status (toolcall_transition).
    toolcall_transition(
        call=call,
        to=ToolCallStatus.APPROVED,
        fields={"arguments": approved, "arguments_hash": approved_hash},
        write=False,
    )
    approval = ReviewApproval(
        review=review, user=user, arguments_hash=approved_hash, comment=comment, at=now
    )
    frm, to = review.status, ReviewStatus.APPROVED
    if to not in REVIEW_TRANSITIONS.get(frm, frozenset()):
        raise IllegalTransition(frm, to, machine="review")
    review_fields = {
        "status": to,
        "decided_at": now,
        "decided_by": user,
        "comment": comment,
        "decision_reason": reason[:200],
    }
    for key, value in review_fields.items():
        setattr(review, key, value)
    events: list[TaskEvent] = [
        event_build(
            task_id=task.id,
            type=EventType.REVIEW_DECIDED,
            actor=actor,
            step_index=task.current_step,
            payload=decided_payload(
                review=review,
                call_id=call.call_id,
                status=to,
                comment=comment,
                reason=reason,
                approvers=[actor],
                approved=approved,
                now=now,
            ),
        )
    ]
    if _read(review, "notices_pending") or review_route(review=review) is not None:
        notifications_plan_closed(review=review, to=to, now=now)
    head_seq, head_hash = plain_global_locks()
    receipt = receipt_build(
        review=review,
        decision="approve",
        actor=actor,
        user=user,
        via=via,
        now=now,
        comment=comment or reason,
        approvals=[actor],
    )
    head = receipt_link(receipt, head_seq=head_seq, head_hash=head_hash)
    updates: list[tuple[Any, list[str]]] = [
        (call, ["status", "arguments", "arguments_hash"]),
        (review, list(review_fields)),
        (head, ["seq", "hash"]),
    ]
    # A graph may pause on several interrupts at once; the task resumes with the last answer
    # (task_resume_when_decided). The task's lock makes "no other pending" hold to the commit.
    requeue = not _read(review, "others_pending")
    if requeue:
        task_fields, status_event = task_requeue_decided_build(
            task=task,
            reason=f"review approved: {review.tool}",
            actor=actor,
            entered=_read(review, "entered"),
        )
        # The job's id is recorded with the decision: no write of its own after the enqueue.
        task.rq_job_id = task_job_id_new()
        updates.append((task, [*task_fields, "rq_job_id"]))
        events.append(status_event)
    rows_write(
        inserts=[
            approval,
            *events,
            audit_build(
                **decided_audit(
                    review=review,
                    user=user,
                    status=to,
                    comment=comment,
                    reason=reason,
                    approved=approved,
                )
            ),
            receipt,
        ],
        updates=updates,
        marks=[(ReviewRolledHour, {"stale": True}, {"hour": hour_floor(review.requested_at)})],
    )
    review_wait_count(review=review, to=to, decided_at=now)
    if requeue:
        task_enqueue(task=task, decided=True, job_id=task.rq_job_id)
