"""Deciding a review: an operator approves (optionally with edited arguments, or remembering
the approval as a standing rule), rejects, or answers a LangGraph interrupt."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from review.models import ReceiptVia, ReviewRequest, ReviewStatus
from review.notifications import notifications_plan_edited
from review.policy import PolicyDecision
from review.previews import review_preview
from review.selectors.access import user_can_decide
from review.selectors.plans import PLAN
from review.services import version_drift
from review.services.approvals import (
    approval_add,
    approver_check,
    decision_check_named,
    decision_check_open,
)
from review.services.approve_plain import review_approve_plain
from review.services.drift_gate import VERSION_DRIFT
from review.services.edits import edit_tighten, edit_validate
from review.services.errors import ReviewConflict, ReviewForbidden, ReviewInvalid
from review.services.graph_interrupts import graph_action_check, graph_decision_check
from review.services.plans import PLAN_DECISIONS
from review.services.remember import remember_fields, remember_suggestion, standing_rule_create
from review.services.reopen import target_check
from review.services.settle import review_settle
from review.services.unknown_outcome import (
    UNKNOWN_OUTCOME,
    UNKNOWN_OUTCOME_DECISIONS,
    UNKNOWN_OUTCOME_HINT,
    review_resolve_unknown_outcome,
)
from tasks.canonical import canonical_hash
from tasks.models import Task
from tasks.services import task_lock


def _kind_check(review: ReviewRequest) -> None:
    """A review kind with decisions of its own refuses these, naming its own (issue #43)."""
    hint, kinds = {
        UNKNOWN_OUTCOME: (UNKNOWN_OUTCOME_HINT, UNKNOWN_OUTCOME_DECISIONS),
        VERSION_DRIFT: version_drift.KIND_DECISIONS,
        PLAN: PLAN_DECISIONS,
    }.get(review.kind, ("", ()))
    if hint:
        raise ReviewInvalid(hint, errors=[{"field": "decision", "message": " | ".join(kinds)}])


def review_decide(
    *,
    review_id: Any,
    user: User,
    decision: str,
    arguments_hash: str | None = None,
    target_hash: str | None = None,
    comment: str = "",
    arguments: dict[str, Any] | None = None,
    reason: str = "",
    result: Any = None,
    response: Any = None,
    remember: dict[str, Any] | None = None,
    migration: str | None = None,
    checkpoint_id: Any = None,
    via: str = ReceiptVia.API,
) -> ReviewRequest:
    """Approve (optionally with edited arguments) or reject a pending review.

    An approval must carry `arguments_hash`, the canonical hash of the arguments its decider
    was shown (`ReviewRequest.arguments`): missing is ReviewInvalid, any other value
    ReviewConflict. Edited arguments are checked against the policy again and the stricter
    requirements apply. A decision at or after `expires_at` is ReviewConflict.

    An approval is recorded per operator; the call is approved once `approvals_required`
    distinct operators approved the same arguments. Then the ToolCall carries the approved
    arguments and their hash (the loop refuses to run anything else), the task goes back to
    `queued` and its job is enqueued after commit. A rejection settles the ToolCall with
    feedback the model sees as the tool result. Raises ReviewForbidden, ReviewConflict or
    ReviewInvalid; on any of them nothing changes.

    `remember` ({"suggestion": id, "until": date, "scope": creator | everyone}) makes one of
    the review's suggested rules (review.standing) a standing rule, with the approval: of the
    call as proposed, by a decider whose one approval settles the review (so the approval is
    final); bad fields are ReviewInvalid naming `remember.<field>`.

    An approval is also about the state of the call's targets (`target_fingerprint`): they are
    re-read first, and a change (or a `target_hash` other than the recorded one) is
    ReviewConflict with reason `target_changed`; the review is then reopened as a new one
    showing the new state (review_reopen), and the decider decides that one.

    A review of kind `unknown_outcome` takes the decisions of `review_resolve_unknown_outcome`
    (`mark_done` with an optional `result`, `rerun`, `fail_task`); `version_drift` those of
    `review_resolve_version_drift` (continue, migrate, restart, cancel); `plan` only
    review_decide_plan's (plan_hash, items): here it is ReviewInvalid. Every decision (a
    partial approval too) appends a receipt (review.receipts), saying it was made `via`."""
    if not user_can_decide(user):
        raise ReviewForbidden("only operators may decide reviews")
    if decision in UNKNOWN_OUTCOME_DECISIONS:
        return review_resolve_unknown_outcome(
            review_id=review_id,
            user=user,
            decision=decision,
            arguments_hash=arguments_hash,
            result=result,
            comment=comment,
            via=via,
        )
    if decision in version_drift.VERSION_DRIFT_DECISIONS:
        return version_drift.review_resolve_version_drift(
            review_id=review_id,
            user=user,
            decision=decision,
            arguments_hash=arguments_hash,
            arguments=arguments,
            migration=migration,
            checkpoint_id=checkpoint_id,
            comment=comment,
            via=via,
        )
    decision_check_named(decision=decision, arguments_hash=arguments_hash)
    remembered = remember_fields(remember=remember, decision=decision)
    if decision == "approve" and arguments is None and remembered is None and arguments_hash:
        # Most decisions: the call approved as proposed, by its one approver (approve_plain).
        plain = review_approve_plain(
            review_id=review_id,
            user=user,
            arguments_hash=arguments_hash,
            target_hash=target_hash,
            comment=comment,
            reason=reason,
            via=via,
        )
        if plain is not None:
            return plain
    task_id, tool_name, spec, interrupt = ReviewRequest.objects.values_list(
        "task_id", "tool", "task__spec", "interrupt"
    ).get(id=review_id)
    if interrupt is not None:
        graph_decision_check(
            interrupt=interrupt, decision=decision, arguments=arguments, response=response
        )
    elif decision == "respond":
        raise ReviewInvalid(
            "respond answers a LangGraph interrupt; this review is a tool call",
            errors=[{"field": "decision", "message": "approve or reject"}],
        )
    edit_policy = None
    if interrupt is None and decision == "approve" and arguments is not None:
        edit_policy = edit_validate(
            task_id=task_id, tool_name=tool_name, arguments=arguments, spec=spec
        )
    actor = user.get_username()
    reopened: ReviewConflict | None = None
    with transaction.atomic():
        task = task_lock(task_id=task_id)
        review = ReviewRequest.objects.select_for_update().get(id=review_id)
        review.task = task  # the row just locked: what the target check and the decision read
        if interrupt is None and decision == "approve":
            reopened = target_check(review=review, target_hash=target_hash, actor=actor)
        if reopened is None:
            _kind_check(review)
            now = decision_check_open(review=review, task=task, seen_hash=arguments_hash)
            if decision == "approve":
                return _approve(
                    task=task,
                    review=review,
                    user=user,
                    interrupt=interrupt,
                    arguments=arguments,
                    edit_policy=edit_policy,
                    remembered=remembered,
                    comment=comment,
                    reason=reason,
                    now=now,
                    via=via,
                )
            if decision == "respond":  # an answer is the call's result: four-eyes holds
                approver_check(review=review, task=task, user=user, act="answer", what="this call")
            return review_settle(
                task=task,
                review=review,
                user=user,
                status=ReviewStatus.RESPONDED if decision == "respond" else ReviewStatus.REJECTED,
                comment=comment,
                reason=reason,
                approved=None,
                now=now,
                response=response,
                via=via,
            )
    # The reopened review commits with this transaction; the decision is refused.
    raise reopened


def _approve(
    *,
    task: Task,
    review: ReviewRequest,
    user: User,
    interrupt: dict[str, Any] | None,
    arguments: dict[str, Any] | None,
    edit_policy: PolicyDecision | None,
    remembered: tuple[str, datetime, str] | None,
    comment: str,
    reason: str,
    now: datetime,
    via: str,
) -> ReviewRequest:
    """An operator's approval of a pending review (review_decide, after its checks): the edit
    held to the policy, the approval counted, and once enough are in the review settled and
    any remembered standing rule created. Caller holds both locks."""
    approved = review.arguments if arguments is None else arguments
    approved_hash = canonical_hash(approved)
    if (
        interrupt is not None
        and approved != review.original_arguments
        and "edit" not in interrupt.get("allowed", [])
    ):
        raise ReviewInvalid(
            "this interrupt does not accept edited arguments",
            errors=[{"field": "arguments", "message": "edits are not allowed here"}],
        )
    if interrupt is not None:
        edit_policy = graph_action_check(review=review, approved=approved)
    edited = arguments is not None and approved_hash != canonical_hash(review.arguments)
    if edited:
        review.edited_arguments = arguments
        review.edited_by = user
        review.edited_at = now
        if edit_policy is not None:
            edit_tighten(review=review, edit=edit_policy)
        # What every later message and page shows is the edited call's effect, and the
        # edited call's targets as they are now are what this approves.
        review.edited_preview, fingerprint = review_preview(review=review)
        if review.target_fingerprint.get("targets") is not None:
            review.target_fingerprint = fingerprint
    approver_check(review=review, task=task, user=user, act="approve its calls", what="this call")
    suggestion = (
        remember_suggestion(review=review, approved=approved, wanted=remembered[0])
        if remembered is not None
        else None
    )
    review.save(
        update_fields=[
            "edited_arguments",
            "edited_preview",
            "edited_by",
            "edited_at",
            "approvals_required",
            "forbid_creator",
            "matched_rules",
            "target_fingerprint",
        ]
    )
    if not approval_add(
        task=task,
        review=review,
        user=user,
        arguments_hash=approved_hash,
        comment=comment,
        now=now,
        via=via,
        decision="approve",
        event={"arguments": approved},
        before={"arguments": review.original_arguments},
        after={"arguments": approved},
    ):
        if edited:
            # Another approval is needed: every channel told of the review is told of the
            # edit, and what it offers to approve is the edited call it shows.
            notifications_plan_edited(review=review, now=now)
        return review
    review_settle(
        task=task,
        review=review,
        user=user,
        status=ReviewStatus.APPROVED,
        comment=comment,
        reason=reason,
        approved=approved,
        now=now,
        via=via,
    )
    if suggestion is not None and remembered is not None:
        standing_rule_create(
            review=review,
            task=task,
            user=user,
            suggestion=suggestion,
            until=remembered[1],
            scope=remembered[2],
            now=now,
        )
    return review
