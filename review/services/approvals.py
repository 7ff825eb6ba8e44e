"""What a decision checks and records before it settles a review: the deadline and the arguments
its decider saw, who may add an approval, and approvals counted toward `approvals_required`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from review.models import ReviewApproval, ReviewRequest, ReviewStatus
from review.receipts import receipt_record
from review.services.errors import ReviewConflict, ReviewForbidden, ReviewInvalid
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import Task
from tasks.services import audit_record, event_record
from tasks.states import TaskStatus


def decision_check_named(*, decision: str, arguments_hash: str | None) -> None:
    """What a decision must name, checked before anything is read or locked."""
    if decision not in ("approve", "reject", "respond"):
        raise ReviewInvalid(
            "decision must be approve, reject or respond",
            errors=[{"field": "decision", "message": "approve, reject or respond"}],
        )
    if decision == "approve" and not arguments_hash:
        raise ReviewInvalid(
            "an approval must name the arguments it approves",
            errors=[
                {
                    "field": "arguments_hash",
                    "message": "required: the arguments_hash of the arguments you were shown",
                }
            ],
        )


def decision_check_seen(*, review: ReviewRequest, seen_hash: str | None, now: datetime) -> None:
    """An approval names the arguments its decider saw; a decision after the deadline is
    refused whether or not the sweep has expired the review yet. Caller holds the lock."""
    if review.expires_at is not None and now >= review.expires_at:
        raise ReviewConflict(
            f"review {review.id} expired at {review.expires_at.isoformat()}; it can no longer "
            "be decided"
        )
    if seen_hash is None:
        return
    current = canonical_hash(review.arguments)
    if seen_hash != current:
        raise ReviewConflict(
            "the arguments under review changed since you saw them (arguments_hash "
            f"{seen_hash[:12]}..., now {current[:12]}...): reload and decide again",
            errors=[{"field": "arguments_hash", "message": f"stale; current is {current}"}],
        )


def decision_check_open(*, review: ReviewRequest, task: Task, seen_hash: str | None) -> datetime:
    """A decision may settle `review`: still pending, its task waiting for a review, before its
    deadline and on the arguments its decider saw (decision_check_seen). Caller holds both
    locks. -> now, the decision's time."""
    if review.status != ReviewStatus.PENDING:
        raise ReviewConflict(f"review {review.id} is already {review.status}")
    if task.status != TaskStatus.WAITING_REVIEW:
        raise ReviewConflict(f"task is {task.status}, not waiting for review")
    now = timezone.now()
    decision_check_seen(review=review, seen_hash=seen_hash, now=now)
    return now


def approver_check(*, review: ReviewRequest, task: Task, user: User, act: str, what: str) -> None:
    """`user` may add an approval to `review`: not the task's creator under forbid_creator
    (four-eyes), and not twice."""
    creator_check(review=review, task=task, user=user, act=act)
    if review.approvals.filter(user=user).exists():
        raise ReviewConflict(f"you already approved {what}; another operator must")


def creator_check(*, review: ReviewRequest, task: Task, user: User, act: str) -> None:
    """Under forbid_creator (four-eyes) the task's creator may not `act`."""
    if review.forbid_creator and task.created_by_id == user.pk:
        raise ReviewForbidden(f"the task's creator may not {act} (four-eyes rule)")


def approval_add(
    *,
    task: Task,
    review: ReviewRequest,
    user: User,
    arguments_hash: str,
    comment: str,
    now: datetime,
    via: str,
    decision: str,
    event: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
) -> bool:
    """Record `user`'s approval of `arguments_hash` (`decision`: approve | rerun). True when as
    many approvals of it as the review requires are in (the caller settles the review); else
    the partial approval is recorded (event with `event`'s facts, audit
    `review_<decision>_partial` from `before` to `after`, receipt) and False. Caller holds both
    locks."""
    ReviewApproval.objects.create(
        review=review, user=user, arguments_hash=arguments_hash, comment=comment, at=now
    )
    count = review.approvals.filter(arguments_hash=arguments_hash).count()
    if count >= review.approvals_required:
        return True
    actor = user.get_username()
    progress = {"approvals": count, "required": review.approvals_required}
    event_record(
        task_id=task.id,
        type=EventType.REVIEW_APPROVAL,
        actor=actor,
        step_index=task.current_step,
        payload={
            "review_id": review.id,
            "call_id": review.tool_call.call_id,
            **event,
            **progress,
            "comment": comment,
        },
    )
    audit_record(
        user=user,
        action=f"review_{decision}_partial",
        task_id=task.id,
        target=f"review {review.id}",
        reason=comment,
        before=before,
        after={**after, **progress},
    )
    receipt_record(
        review=review,
        decision=f"{decision}_partial",
        actor=actor,
        user=user,
        via=via,
        now=now,
        comment=comment,
    )
    return False
