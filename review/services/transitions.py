"""The review request's state machine: opening a review (pending) and the one function that
changes its status (review.models.REVIEW_TRANSITIONS), with what every change brings along (the
notifications it plans, the rollups it marks stale, the wait it counts)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from harness_base.metrics import (
    REVIEW_SLA_BREACHES,
    REVIEW_WAIT_SECONDS,
    metric_inc,
    metric_observe,
)
from review.models import REVIEW_TRANSITIONS, ReviewRequest, ReviewRule, ReviewStatus
from review.notifications import notifications_plan_closed, notifications_plan_opened
from review.policy import PolicyDecision, policy_hash
from review.rollups import review_rollups_stale
from review.selectors.rule_labels import review_breached_labels, review_rule_labels
from review.services.errors import ReviewConflict
from tasks.models import TaskEvent, ToolCall
from tasks.services import event_insert, task_lock
from tasks.states import IllegalTransition


def review_transition(
    *,
    review: ReviewRequest,
    to: str,
    fields: dict[str, Any] | None = None,
    now: datetime | None = None,
    event: TaskEvent | None = None,
    task_locked: bool = False,
) -> ReviewRequest:
    """The one function that changes a review's status (review.models.REVIEW_TRANSITIONS).

    Checks the table; sets the status, `decided_at` (derived: when the review left pending)
    and `fields` (who decided, the comment…); then, in one transaction, locks the task row
    (lock contract: task first), writes the changed fields with a conditional UPDATE on the
    status read (ReviewConflict if another decision won) and records `event`, if given.
    `task_locked`: the caller's transaction holds the task row's lock already; the change is
    part of that transaction (no savepoint, no second lock).
    Raises IllegalTransition (machine "review") for a move the table does not allow."""
    frm = review.status
    if to not in REVIEW_TRANSITIONS.get(frm, frozenset()):
        raise IllegalTransition(frm, to, machine="review")
    updates: dict[str, Any] = {"status": to, "decided_at": now or timezone.now(), **(fields or {})}
    with transaction.atomic(savepoint=not task_locked):
        if not task_locked:
            task_lock(task_id=review.task_id)
        if ReviewRequest.objects.filter(pk=review.pk, status=frm).update(**updates) != 1:
            raise ReviewConflict(f"review {review.pk} is no longer {frm}")
        if event is not None:
            event_insert(event)
        notifications_plan_closed(review=review, to=to, now=updates["decided_at"])
        review_rollups_stale(requested_at=review.requested_at)
        if frm == ReviewStatus.PENDING:
            review_wait_count(review=review, to=to, decided_at=updates["decided_at"])
    for key, value in updates.items():
        setattr(review, key, value)
    return review


def review_wait_count(*, review: ReviewRequest, to: str, decided_at: datetime) -> None:
    """The review's wait in harness_review_wait_seconds, per matched rule, once it commits
    (review_transition; a plain approval's one-statement write, approve_plain)."""
    wait_s = (decided_at - review.requested_at).total_seconds()
    rules = review_rule_labels(matched_rules=review.matched_rules)
    # A canceled review (its task ended) was nobody's decision to make in time.
    late = (
        []
        if to == ReviewStatus.CANCELED
        else review_breached_labels(matched_rules=review.matched_rules, waited_s=wait_s)
    )

    def count() -> None:
        for rule in rules:
            metric_observe(REVIEW_WAIT_SECONDS, wait_s, rule=rule, outcome=to)
        for rule in late:
            metric_inc(REVIEW_SLA_BREACHES, rule=rule)

    transaction.on_commit(count)


def _versions_of(review: ReviewRequest | None) -> dict[str, Any]:
    return dict(review.versions) if review is not None else {}


def review_request_open(
    *,
    tool_call: ToolCall,
    checkpoint_id: Any,
    decision: PolicyDecision,
    preview: str,
    kind: str = "policy",
    interrupt: dict[str, Any] | None = None,
    standing_rule: ReviewRule | None = None,
    target_fingerprint: dict[str, Any] | None = None,
    reopened_from: ReviewRequest | None = None,
    changes: list[str] | None = None,
    versions: dict[str, Any] | None = None,
    drift: dict[str, Any] | None = None,
    plan: dict[str, Any] | None = None,
) -> ReviewRequest:
    """Called by the loop inside its fenced transaction, just before the task pauses (or, for
    a call a standing rule allows, just before it runs: `kind` standing_rule; or by a decision
    that found the target changed: review_reopen). Records what the approval will be about
    besides the arguments: the targets' state (tasks.fingerprint) and the policy's hash; a
    reopened review names the review it replaces and what changed. `versions`: the code the
    review is opened under (agent.versions; a reopened review keeps its predecessor's)."""
    now = timezone.now()
    expires_at = (
        now + timedelta(seconds=decision.expires_after_s) if decision.expires_after_s else None
    )
    review = ReviewRequest.objects.create(
        task_id=tool_call.task_id,
        tool_call=tool_call,
        checkpoint_id=checkpoint_id,
        tool=tool_call.tool,
        risk=tool_call.risk,
        kind=kind,
        matched_rules=decision.rules,
        original_arguments=tool_call.arguments,
        preview=preview,
        approvals_required=decision.approvals_required,
        forbid_creator=decision.forbid_creator,
        on_expiry=decision.on_expiry,
        requested_at=now,
        expires_at=expires_at,
        reason=decision.reason[:200],
        interrupt=interrupt,
        standing_rule=standing_rule,
        target_fingerprint=target_fingerprint or {},
        policy_hash=policy_hash(decision),
        reopened_from=reopened_from,
        changes=changes or [],
        versions=versions if versions is not None else _versions_of(reopened_from),
        drift=drift,
        plan=plan,
    )
    notifications_plan_opened(review=review)
    return review
