"""Review services: opening review requests (from the agent loop), deciding them (operators),
expiring them (the sweep); who hears of each is review/notifications.py.

Lock contract: every service here that changes a review locks the task row first
(`tasks.services.task_lock`, the order the loop and `task_transition` use), then the review
row. A decision therefore serialises with every other decision on the same task: exactly one
of several concurrent decisions sees the review `pending`; the others get ReviewConflict."""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal, NoReturn

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from harness_base.metrics import REVIEW_WAIT_SECONDS, metric_observe
from review import standing
from review.models import (
    REVIEW_TRANSITIONS,
    ReceiptVia,
    ReviewApproval,
    ReviewRequest,
    ReviewRule,
    ReviewStatus,
    RuleAction,
    RuleKind,
    RuleScope,
)
from review.notifications import notifications_plan_closed, notifications_plan_opened
from review.policy import PolicyDecision, evaluate, graph_action_policy, policy_hash
from review.receipts import receipt_record
from review.recheck import (
    review_edited_fingerprint,
    review_requirements,
    review_target_changes,
    review_targets_now,
)
from review.rollups import review_rollups_stale
from review.selectors import review_rule_labels, user_can_decide
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.feedback import compact_feedback
from tasks.fingerprint import previewed
from tasks.models import Task, TaskEvent, ToolCall, ToolCallStatus
from tasks.selectors import task_tool
from tasks.services import (
    audit_record,
    event_build,
    event_insert,
    event_record,
    task_enqueue,
    task_lock,
    task_review_outcome_count,
    task_transition,
    toolcall_transition,
)
from tasks.states import IllegalTransition, TaskStatus, toolcall_can_transition

log = logging.getLogger(__name__)

# The kind of a review a standing rule decided (no human): review.standing.
STANDING_RULE = "standing_rule"


class ReviewError(Exception):
    """A decision that cannot be made; `status` is the HTTP status the API answers with."""

    status = 400

    def __init__(
        self,
        message: str,
        *,
        errors: list[dict[str, str]] | None = None,
        reason: str = "",
        review_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or []
        # A machine-readable cause (`target_changed`) and the review it points to.
        self.reason = reason
        self.review_id = review_id


class ReviewForbidden(ReviewError):
    status = 403


class ReviewConflict(ReviewError):
    status = 409


class ReviewInvalid(ReviewError):
    status = 422


# --- the state machine ----------------------------------------------------------------------


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
            _count_wait(review=review, to=to, decided_at=updates["decided_at"])
    for key, value in updates.items():
        setattr(review, key, value)
    return review


def _count_wait(*, review: ReviewRequest, to: str, decided_at: datetime) -> None:
    """The review's wait in harness_review_wait_seconds, per matched rule, once it commits."""
    wait_s = (decided_at - review.requested_at).total_seconds()
    rules = review_rule_labels(matched_rules=review.matched_rules)

    def count() -> None:
        for rule in rules:
            metric_observe(REVIEW_WAIT_SECONDS, wait_s, rule=rule, outcome=to)

    transaction.on_commit(count)


# --- opening -------------------------------------------------------------------------------


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
) -> ReviewRequest:
    """Called by the loop inside its fenced transaction, just before the task pauses (or, for
    a call a standing rule allows, just before it runs: `kind` standing_rule; or by a decision
    that found the target changed: review_reopen). Records what the approval will be about
    besides the arguments: the targets' state (tasks.fingerprint) and the policy's hash; a
    reopened review names the review it replaces and what changed."""
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
    )
    notifications_plan_opened(review=review)
    return review


# --- gating a call on a human (called by the loop) ----------------------------------------

# The loop's pause (agent.runtime.run.Run.pause with the `before_review` trigger): one fenced
# write of the call, these events and a checkpoint, inside which `open_review(checkpoint id or
# None)` runs and the task moves to waiting_review; the job then ends.
ReviewPause = Callable[[list[TaskEvent], Callable[[Any], Any]], NoReturn]


def review_gate(
    *,
    tool_call: ToolCall,
    decision: PolicyDecision,
    preview: str,
    step_index: int,
    pause: ReviewPause,
    standing_rule: ReviewRule | None = None,
    held: str = "",
    target_fingerprint: dict[str, Any] | None = None,
    reopened_from: ReviewRequest | None = None,
    changes: list[str] | None = None,
) -> NoReturn:
    """A call the policy sends to a human: it awaits review, a `review_requested` event says
    why, and its review opens against the checkpoint the pause takes, with the state of the
    call's targets its preview was computed against. `standing_rule`: one matched but may not
    allow it (`held` says why); the review counts in its track record. An approved call whose
    approval no longer holds (review.recheck) comes back here: `reopened_from` and `changes`
    say which review and what changed."""
    toolcall_transition(call=tool_call, to=ToolCallStatus.AWAITING_REVIEW, write=False)
    if held:
        decision = dataclasses.replace(decision, reason=f"{decision.reason} ({held})")
    requested = event_build(
        task_id=tool_call.task_id,
        type=EventType.REVIEW_REQUESTED,
        payload={
            "call_id": tool_call.call_id,
            "tool": tool_call.tool,
            "rules": decision.rules,
            "reason": decision.reason,
            **({"reopened_from": reopened_from.id, "changes": changes} if reopened_from else {}),
        },
        step_index=step_index,
    )
    pause(
        [requested],
        lambda checkpoint_id: review_request_open(
            tool_call=tool_call,
            checkpoint_id=checkpoint_id,
            decision=decision,
            preview=preview,
            standing_rule=standing_rule,
            target_fingerprint=target_fingerprint,
            reopened_from=reopened_from,
            changes=changes,
        ),
    )


# --- deciding ------------------------------------------------------------------------------


def _field_errors(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(["arguments", *(str(p) for p in item["loc"])]), "message": item["msg"]}
        for item in exc.errors()
    ]


def _validate_arguments(
    *, task_id: Any, tool_name: str, arguments: Any, spec: dict[str, Any]
) -> PolicyDecision:
    """Edited arguments must satisfy the tool's schema and must not be denied by policy.
    Returns the policy's decision on them (the edit is held to it)."""
    if not isinstance(arguments, dict):
        raise ReviewInvalid(
            "arguments must be a JSON object",
            errors=[{"field": "arguments", "message": "must be a JSON object"}],
        )
    tool = task_tool(task_id=task_id, name=tool_name)
    if tool is None:
        raise ReviewConflict(f"tool {tool_name!r} is no longer available")
    try:
        tool.args_model.model_validate(arguments)
    except ValidationError as exc:
        raise ReviewInvalid(
            f"invalid arguments for {tool_name}", errors=_field_errors(exc)
        ) from None
    policy = evaluate(tool=tool, args=arguments, spec=spec)
    if policy.action == "deny":
        raise ReviewInvalid(
            f"the policy denies these arguments: {policy.reason}",
            errors=[{"field": "arguments", "message": policy.reason}],
        )
    return policy


def _check_seen(*, review: ReviewRequest, seen_hash: str | None, now: datetime) -> None:
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


def _tighten(*, review: ReviewRequest, edit: PolicyDecision) -> None:
    """An edit is held to the policy on the new arguments as well as the old: the stricter
    of the two applies (more approvals, creator ban). Caller holds the lock."""
    if edit.action != "review":
        return
    review.approvals_required = max(review.approvals_required, edit.approvals_required)
    review.forbid_creator = review.forbid_creator or edit.forbid_creator
    review.matched_rules = review.matched_rules + [
        rule for rule in edit.rules if rule not in review.matched_rules
    ]


def _rejection_feedback(*, tool: str, reason: str, comment: str) -> str:
    return compact_feedback(
        what=f"a reviewer rejected {tool}: {reason or comment or 'no reason given'}; "
        "it did not run",
        expected=f"what the reviewer asks: {comment or '(no comment)'}",
        check=f"do not repeat the same {tool} call; adapt the plan or finish",
    )


def _expiry_feedback(*, tool: str) -> str:
    return compact_feedback(
        what=f"the review of {tool} expired before anyone decided; it did not run",
        expected="an approach that does not depend on this call",
        check=f"do not repeat the same {tool} call unless it is essential; say so in the answer",
    )


TARGET_CHANGED = "target_changed"


def review_reopen(*, review: ReviewRequest, changes: list[str], actor: str) -> ReviewRequest:
    """The pending `review` is about a state of its targets that no longer is: it is canceled
    and a new pending review of the same call (its proposed arguments: edits and approvals of
    the old state do not carry over) opens on the same terms, with a fresh preview and
    fingerprint and what changed. Caller holds the task's lock."""
    proposed = review.original_arguments
    tool, ctx, args, _local = review_targets_now(review=review, arguments=proposed)
    if tool is None:
        raise ReviewConflict(f"tool {review.tool!r} is no longer available")
    preview, fingerprint = previewed(tool=tool, ctx=ctx, args=args, arguments=proposed)
    comment = "; ".join(changes)[:10_000]
    now = timezone.now()
    review_transition(review=review, to=ReviewStatus.CANCELED, now=now, fields={"comment": comment})
    receipt_record(
        review=review,
        decision="cancel",
        actor="system:recheck",
        via=ReceiptVia.RECHECK,
        now=now,
        comment=comment,
    )
    call = review.tool_call
    reopened = review_request_open(
        tool_call=call,
        checkpoint_id=review.checkpoint_id,
        decision=review_requirements(review=review),
        preview=preview,
        kind=review.kind,
        target_fingerprint=fingerprint,
        reopened_from=review,
        changes=changes,
    )
    event_record(
        task_id=review.task_id,
        type=EventType.REVIEW_REQUESTED,
        actor=actor,
        payload={
            "call_id": call.call_id,
            "tool": review.tool,
            "rules": review.matched_rules,
            "reason": review.reason,
            "reopened_from": review.id,
            "changes": changes,
        },
    )
    return reopened


def _check_target(
    *, review: ReviewRequest, target_hash: str | None, actor: str
) -> ReviewConflict | None:
    """Before an approval, in the decision's transaction (both rows locked): the call's targets
    on this machine's disk must be what the review recorded and showed (and, if the decider
    names it, the fingerprint they were shown). A stale `target_hash` raises ReviewConflict
    (reason `target_changed`); a change reopens the review with the new state and returns the
    ReviewConflict (naming the new review) for the caller to raise once the reopen commits."""
    recorded = review.target_fingerprint.get("hash")
    if review.status != ReviewStatus.PENDING or recorded is None:
        return None  # the decision itself says why it cannot be made
    if target_hash is not None and target_hash != recorded:
        raise ReviewConflict(
            "the call's target is no longer the state you were shown "
            f"(target_hash {target_hash[:12]}..., now {recorded[:12]}...): reload and "
            "decide again",
            errors=[{"field": "target_hash", "message": f"stale; current is {recorded}"}],
            reason=TARGET_CHANGED,
            review_id=review.id,
        )
    try:
        _tool, _ctx, _args, current = review_targets_now(review=review)
    except Exception as exc:  # the targets cannot be read: the approval cannot be made
        raise ReviewConflict(
            f"could not check the call's targets: {type(exc).__name__}: {exc}",
            reason=TARGET_CHANGED,
            review_id=review.id,
        ) from None
    changes = review_target_changes(review=review, current=current)
    if not changes:
        return None
    reopened = review_reopen(review=review, changes=changes, actor=actor)
    return ReviewConflict(
        "; ".join(changes) + f": the new state is under review {reopened.id}",
        errors=[{"field": "target_hash", "message": change} for change in changes],
        reason=TARGET_CHANGED,
        review_id=reopened.id,
    )


def review_decide(
    *,
    review_id: Any,
    user: AbstractBaseUser,
    decision: Literal["approve", "reject", "respond", "mark_done", "rerun", "fail_task"],
    arguments_hash: str | None = None,
    target_hash: str | None = None,
    comment: str = "",
    arguments: dict[str, Any] | None = None,
    reason: str = "",
    result: Any = None,
    response: Any = None,
    remember: dict[str, Any] | None = None,
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
    instead (`mark_done` with an optional `result`, `rerun`, `fail_task`).

    Every decision, an operator's approval short of `approvals_required` included, appends a
    receipt (review.receipts) in its transaction, saying it was made `via` the page or the API."""
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
    remembered = _remember_fields(remember=remember, decision=decision)
    task_id, tool_name, spec, interrupt = ReviewRequest.objects.values_list(
        "task_id", "tool", "task__spec", "interrupt"
    ).get(id=review_id)
    if interrupt is not None:
        _graph_decision_check(
            interrupt=interrupt, decision=decision, arguments=arguments, response=response
        )
    elif decision == "respond":
        raise ReviewInvalid(
            "respond answers a LangGraph interrupt; this review is a tool call",
            errors=[{"field": "decision", "message": "approve or reject"}],
        )
    edit_policy = None
    if interrupt is None and decision == "approve" and arguments is not None:
        edit_policy = _validate_arguments(
            task_id=task_id, tool_name=tool_name, arguments=arguments, spec=spec
        )
    actor = user.get_username()
    reopened: ReviewConflict | None = None
    with transaction.atomic():
        task = task_lock(task_id=task_id)
        review = ReviewRequest.objects.select_for_update().get(id=review_id)
        review.task = task  # the row just locked: what the target check and the decision read
        if interrupt is None and decision == "approve":
            reopened = _check_target(review=review, target_hash=target_hash, actor=actor)
        if reopened is None:
            if review.kind == UNKNOWN_OUTCOME:
                raise ReviewInvalid(
                    _UNKNOWN_OUTCOME_HINT,
                    errors=[
                        {"field": "decision", "message": " | ".join(UNKNOWN_OUTCOME_DECISIONS)}
                    ],
                )
            if review.status != ReviewStatus.PENDING:
                raise ReviewConflict(f"review {review_id} is already {review.status}")
            if task.status != TaskStatus.WAITING_REVIEW:
                raise ReviewConflict(f"task is {task.status}, not waiting for review")
            now = timezone.now()
            _check_seen(review=review, seen_hash=arguments_hash, now=now)
            if decision == "approve":
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
                    edit_policy = _graph_action_check(review=review, approved=approved)
                if arguments is not None and approved_hash != canonical_hash(review.arguments):
                    review.edited_arguments = arguments
                    if edit_policy is not None:
                        _tighten(review=review, edit=edit_policy)
                    if review.target_fingerprint.get("targets") is not None:
                        # The edited call's targets as they are now are what this approves.
                        review.target_fingerprint = review_edited_fingerprint(review=review)
                _approver_check(
                    review=review, task=task, user=user, act="approve its calls", what="this call"
                )
                suggestion = (
                    _remember_suggestion(review=review, approved=approved, wanted=remembered[0])
                    if remembered is not None
                    else None
                )
                review.save(
                    update_fields=[
                        "edited_arguments",
                        "approvals_required",
                        "forbid_creator",
                        "matched_rules",
                        "target_fingerprint",
                    ]
                )
                if not _approval_add(
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
                    return review
                _settle(
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
                    _standing_rule_create(
                        review=review,
                        task=task,
                        user=user,
                        suggestion=suggestion,
                        until=remembered[1],
                        scope=remembered[2],
                        now=now,
                    )
                return review
            return _settle(
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


def _approver_check(
    *, review: ReviewRequest, task: Task, user: AbstractBaseUser, act: str, what: str
) -> None:
    """`user` may add an approval to `review`: not the task's creator under forbid_creator
    (four-eyes), and not twice."""
    if review.forbid_creator and task.created_by_id == user.pk:
        raise ReviewForbidden(f"the task's creator may not {act} (four-eyes rule)")
    if review.approvals.filter(user=user).exists():
        raise ReviewConflict(f"you already approved {what}; another operator must")


def _approval_add(
    *,
    task: Task,
    review: ReviewRequest,
    user: AbstractBaseUser,
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


def _settle(
    *,
    task: Task,
    review: ReviewRequest,
    user: AbstractBaseUser,
    status: str,
    comment: str,
    reason: str,
    approved: dict[str, Any] | None,
    now: datetime,
    via: str,
    response: Any = None,
) -> ReviewRequest:
    """Close the review, settle its ToolCall, record the receipt, requeue the task. Caller
    holds both locks."""
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
    verb = {ReviewStatus.APPROVED: "approved", ReviewStatus.RESPONDED: "responded"}.get(
        status, "rejected"
    )
    payload = {
        "review_id": review.id,
        "call_id": call.call_id,
        "tool": review.tool,
        "decision": verb,
        "comment": comment,
        "reason": reason,
        "approvers": list(review.approvals.values_list("user__username", flat=True)),
        "original_arguments": review.original_arguments,
        "approved_arguments": approved,
        "edited": approved is not None and approved != review.original_arguments,
        "arguments_hash": canonical_hash(approved if approved is not None else review.arguments),
        "wait_s": round((now - review.requested_at).total_seconds(), 3),
    }
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
        user=user,
        action="review_approve" if approved is not None else "review_reject",
        task_id=task.id,
        target=f"review {review.id}",
        reason=reason or comment,
        before={"arguments": review.original_arguments, "status": "pending"},
        after={"arguments": approved, "status": status, "comment": comment},
    )
    receipt_record(
        review=review,
        decision={ReviewStatus.APPROVED: "approve", ReviewStatus.RESPONDED: "respond"}.get(
            status, "reject"
        ),
        actor=actor,
        user=user,
        via=via,
        now=now,
        comment=comment or reason,
    )
    _resume(task=task, review=review, reason=f"review {verb}: {review.tool}", actor=actor, now=now)
    return review


def _resume(*, task: Task, review: ReviewRequest, reason: str, actor: str, now: datetime) -> None:
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
    task_enqueue(task=task)


# --- standing rules (review.standing) ---------------------------------------------------------


def _remember_invalid(field: str, message: str) -> ReviewInvalid:
    return ReviewInvalid(
        f"{field}: {message}", errors=[{"field": f"remember.{field}", "message": message}]
    )


def _remember_fields(
    *, remember: dict[str, Any] | None, decision: str
) -> tuple[str, datetime, str] | None:
    """(suggestion id, until, scope) of a decision's `remember`, checked before any lock."""
    if remember is None:
        return None
    if decision != "approve":
        raise ReviewInvalid(
            "only an approval can be remembered",
            errors=[{"field": "remember", "message": "only with decision approve"}],
        )
    wanted = remember.get("suggestion")
    if not isinstance(wanted, str) or not wanted:
        raise _remember_invalid("suggestion", "required: the id of one of suggested_rules")
    scope = remember.get("scope") or RuleScope.CREATOR
    if scope not in RuleScope.values:
        raise _remember_invalid("scope", " | ".join(RuleScope.values))
    try:
        until = standing.until_parse(remember.get("until"), now=timezone.now())
    except ValueError as exc:
        raise _remember_invalid("until", str(exc)) from None
    return wanted, until, scope


def _remember_suggestion(
    *, review: ReviewRequest, approved: dict[str, Any], wanted: str
) -> standing.Suggestion:
    """The suggestion a remember names, recomputed from this review's call (a client names
    one, never sends rule fields); only for the call as proposed. Caller holds the lock."""
    if not standing.review_rememberable(review):
        raise _remember_invalid(
            "suggestion",
            "this review cannot become a standing rule (it needs "
            f"{review.approvals_required} approvals, or is not a policy review of a call)",
        )
    if canonical_hash(approved) != canonical_hash(review.original_arguments):
        raise _remember_invalid(
            "suggestion", "a standing rule is made from the call as proposed, not an edit"
        )
    for suggestion in standing.review_suggestions(review):
        if suggestion.id == wanted:
            return suggestion
    raise _remember_invalid("suggestion", "not one of this review's suggested_rules")


def _standing_rule_create(
    *,
    review: ReviewRequest,
    task: Task,
    user: AbstractBaseUser,
    suggestion: standing.Suggestion,
    until: datetime,
    scope: str,
    now: datetime,
) -> ReviewRule:
    if scope == RuleScope.CREATOR and task.created_by_id is None:
        raise _remember_invalid("scope", "this task has no creator; choose everyone")
    name = f"standing-{review.id}"
    if ReviewRule.objects.filter(name=name).exists():  # an admin's rule took the name
        name = f"{name}-{secrets.token_hex(3)}"
    rule = ReviewRule.objects.create(
        name=name,
        kind=RuleKind.STANDING,
        position=0,
        action=RuleAction.ALLOW,
        reason=suggestion.description[:200],
        **suggestion.rule_fields(),
        origin_review=review,
        created_by=user,
        scope=scope,
        scope_user_id=task.created_by_id if scope == RuleScope.CREATOR else None,
        until=until,
        created_at=now,
    )
    audit_record(
        user=user,
        action="standing_rule_create",
        task_id=task.id,
        target=f"standing rule {rule.name}",
        reason=suggestion.description,
        after={
            "rule": rule.name,
            "review": review.id,
            **suggestion.rule_fields(),
            "scope": scope,
            "scope_user": task.created_by.get_username()
            if scope == RuleScope.CREATOR and task.created_by
            else None,
            "until": until.isoformat(),
        },
    )
    return rule


def standing_rule_actor(rule: ReviewRule) -> str:
    return f"standing rule {rule.name}"


# The loop's write for a call a standing rule allows: one fenced write of the call and these
# events, inside which `record()` runs; then the call runs in the same job.
StandingWrite = Callable[[list[TaskEvent], Callable[[], Any]], None]


def review_gate_standing(
    *,
    tool_call: ToolCall,
    rule: ReviewRule,
    decision: PolicyDecision,
    preview: str,
    step_index: int,
    write: StandingWrite,
    target_fingerprint: dict[str, Any] | None = None,
    reopened_from: ReviewRequest | None = None,
    changes: list[str] | None = None,
) -> ReviewRequest:
    """A call the policy sends to review that a standing rule allows (review.standing): it is
    approved as a human's approval would approve it (the arguments and their hash), by the
    rule, and recorded as a review of kind `standing_rule` decided by it — its event, the
    review history and the audit log name the rule. It records the targets' state as a human's
    review would (review.recheck checks it, and the rule again, if the call runs later)."""
    toolcall_transition(call=tool_call, to=ToolCallStatus.AWAITING_REVIEW, write=False)
    toolcall_transition(
        call=tool_call,
        to=ToolCallStatus.APPROVED,
        fields={"arguments_hash": canonical_hash(tool_call.arguments)},
        write=False,
    )
    actor = standing_rule_actor(rule)
    opened: list[ReviewRequest] = []

    def record() -> None:
        review = review_request_open(
            tool_call=tool_call,
            checkpoint_id=None,
            decision=decision,
            preview=preview,
            kind=STANDING_RULE,
            standing_rule=rule,
            target_fingerprint=target_fingerprint,
            reopened_from=reopened_from,
            changes=changes,
        )
        review_transition(
            review=review,
            to=ReviewStatus.APPROVED,
            fields={"comment": f"allowed by {actor}", "decision_reason": STANDING_RULE},
            event=event_build(
                task_id=tool_call.task_id,
                type=EventType.REVIEW_DECIDED,
                actor=actor,
                step_index=step_index,
                payload={
                    "review_id": review.id,
                    "call_id": tool_call.call_id,
                    "tool": tool_call.tool,
                    "decision": "approved",
                    "standing_rule": rule.name,
                    "comment": f"allowed by {actor}",
                    "approvers": [],
                    "original_arguments": tool_call.arguments,
                    "approved_arguments": tool_call.arguments,
                    "edited": False,
                },
            ),
        )
        receipt_record(
            review=review,
            decision="approve",
            actor=f"rule:{rule.name}",
            via=ReceiptVia.STANDING_RULE,
            now=review.decided_at,
            comment=f"allowed by {actor}",
        )
        audit_record(
            user=None,
            actor_name=actor,
            action="standing_rule_allow",
            task_id=tool_call.task_id,
            target=f"review {review.id}",
            reason=f"{tool_call.tool} {tool_call.call_id}",
            after={"rule": rule.name, "arguments_hash": tool_call.arguments_hash},
        )
        opened.append(review)

    write([], record)
    return opened[0]


def standing_rule_pause(
    *, rule_id: Any, reason: str, user: AbstractBaseUser | None = None, cause: str = "manual"
) -> bool:
    """Pause a standing rule: it allows nothing (its calls go to review) until an operator
    resumes it. A conditional UPDATE, so of concurrent pauses one records it. -> paused now.
    With no `user` the rule pauses itself (a call it allowed went wrong)."""
    if user is not None and not user_can_decide(user):
        raise ReviewForbidden("only operators may pause standing rules")
    now = timezone.now()
    reason = reason[:300]
    with transaction.atomic():
        if (
            ReviewRule.objects.filter(pk=rule_id, kind=RuleKind.STANDING, paused=False).update(
                paused=True, paused_reason=reason, paused_at=now
            )
            != 1
        ):
            return False
        name = ReviewRule.objects.values_list("name", flat=True).get(pk=rule_id)
        audit_record(
            user=user,
            actor_name="" if user is not None else f"standing rule {name}",
            action="standing_rule_pause",
            target=f"standing rule {name}",
            reason=reason,
            before={"paused": False},
            after={"paused": True, "cause": cause},
        )
    return True


def standing_rule_resume(*, rule_id: Any, user: AbstractBaseUser, reason: str = "") -> ReviewRule:
    """An operator trusts a paused standing rule again. Raises ReviewForbidden (not an
    operator), ReviewConflict (not paused, or past its `until`)."""
    if not user_can_decide(user):
        raise ReviewForbidden("only operators may resume standing rules")
    with transaction.atomic():
        rule = ReviewRule.objects.select_for_update().get(pk=rule_id, kind=RuleKind.STANDING)
        if not rule.paused:
            raise ReviewConflict(f"standing rule {rule.name} is not paused")
        if rule.until is None or rule.until <= timezone.now():
            raise ReviewConflict(f"standing rule {rule.name} has ended; make a new one")
        before = {"paused": True, "paused_reason": rule.paused_reason}
        rule.paused, rule.paused_reason, rule.paused_at = False, "", None
        rule.save(update_fields=["paused", "paused_reason", "paused_at", "updated_at"])
        audit_record(
            user=user,
            action="standing_rule_resume",
            target=f"standing rule {rule.name}",
            reason=reason,
            before=before,
            after={"paused": False},
        )
    return rule


def standing_rules_distrust(
    *,
    tool_call_ids: list[Any],
    cause: str,
    detail: str,
    user: AbstractBaseUser | None = None,
) -> int:
    """Calls standing rules allowed went wrong (`cause`: rolled_back, failed,
    unknown_outcome): each rule that allowed one pauses itself, saying why. A rollback also
    marks the review (the rule's track record counts it). -> how many rules paused."""
    allowed = list(
        ReviewRequest.objects.filter(
            tool_call_id__in=tool_call_ids, kind=STANDING_RULE
        ).values_list("id", "standing_rule_id", "tool_call__tool", "tool_call__call_id")
    )
    paused = 0
    for review_id, rule_id, tool, call_id in allowed:
        if cause == "rolled_back":
            ReviewRequest.objects.filter(pk=review_id, rolled_back_at__isnull=True).update(
                rolled_back_at=timezone.now()
            )
        what = {
            "rolled_back": "was rolled back",
            "failed": "failed with a permanent error",
            "unknown_outcome": "ended with an unknown outcome",
        }[cause]
        paused += standing_rule_pause(
            rule_id=rule_id,
            reason=f"{tool} {call_id} (review {review_id}) {what}: {detail}",
            user=user,
            cause=cause,
        )
    return paused


# --- LangGraph interrupts (kind `langgraph`, see agent.graph_runner) ---------------------------


def _graph_action_check(*, review: ReviewRequest, approved: dict[str, Any]) -> PolicyDecision:
    """The graph runs what is approved, so the policy holds for it as for a harness tool: an
    action a deny rule matches (as asked or as edited) cannot be approved, and an edit is held
    to the rules on the new arguments (`_tighten`). Caller holds the lock."""
    policy = graph_action_policy(tool_name=review.tool, args=approved)
    if policy.action == "deny":
        edited = approved != review.original_arguments
        raise ReviewInvalid(
            f"the policy denies this action: {policy.reason}; reject it or respond instead",
            errors=[{"field": "arguments" if edited else "decision", "message": policy.reason}],
        )
    return policy


def _graph_decision_check(
    *, interrupt: dict[str, Any], decision: str, arguments: Any, response: Any
) -> None:
    allowed = interrupt.get("allowed") or []
    wanted = "edit" if decision == "approve" and arguments is not None else decision
    if decision not in allowed and not (decision == "approve" and "edit" in allowed):
        raise ReviewInvalid(
            f"this interrupt accepts {', '.join(allowed)}",
            errors=[{"field": "decision", "message": " | ".join(allowed)}],
        )
    if wanted == "edit" and not isinstance(arguments, dict):
        raise ReviewInvalid(
            "arguments must be a JSON object",
            errors=[{"field": "arguments", "message": "must be a JSON object"}],
        )
    if wanted == "approve" and "approve" not in allowed:
        # The graph would refuse an approval it did not offer (and fail the task).
        raise ReviewInvalid(
            "this interrupt takes edited arguments, not an approval as asked",
            errors=[{"field": "arguments", "message": "required: the edited arguments"}],
        )
    if decision == "respond":
        if response is None:
            raise ReviewInvalid(
                "respond needs a response",
                errors=[{"field": "response", "message": "required for respond"}],
            )
        if interrupt.get("mode") != "plain" and not isinstance(response, str):
            raise ReviewInvalid(
                "the response to a tool approval is the tool's answer: a string",
                errors=[{"field": "response", "message": "must be a string"}],
            )


def graph_resume_value(
    *,
    review: ReviewRequest,
    status: str,
    approved: dict[str, Any] | None,
    comment: str,
    response: Any,
) -> Any:
    """The answer the graph gets for this review, in the shape its interrupt expects: a plain
    interrupt gets {"type": approve | reject | respond, ...}; a HumanInTheLoopMiddleware
    action gets the middleware's decision (approve, edit with the edited action, reject with
    a message, respond with a message); a plain interrupt of a graph registered with
    `interrupt_resume: value` gets the response itself. An expired review answers as a
    rejection."""
    plain = (review.interrupt or {}).get("mode") == "plain"
    edit_only = "approve" not in ((review.interrupt or {}).get("allowed") or ["approve"])
    if status == ReviewStatus.APPROVED:
        changed = approved is not None and (approved != review.original_arguments or edit_only)
        if changed and not plain:
            return {"type": "edit", "edited_action": {"name": review.tool, "args": approved}}
        return {"type": "approve"}
    if status == ReviewStatus.RESPONDED and (review.interrupt or {}).get("resume") == "value":
        return response  # harness.yaml interrupt_resume: value
    if status == ReviewStatus.RESPONDED:
        return (
            {"type": "respond", "value": response}
            if plain
            else {
                "type": "respond",
                "message": response,
            }
        )
    message = comment or ("the review expired" if status == ReviewStatus.EXPIRED else "")
    return {"type": "reject", "message": message}


# --- calls whose outcome is unknown --------------------------------------------------------

UNKNOWN_OUTCOME = "unknown_outcome"
UNKNOWN_OUTCOME_DECISIONS = ("mark_done", "rerun", "fail_task")
_UNKNOWN_OUTCOME_HINT = (
    "the call's outcome is unknown: decide mark_done (it took effect), "
    "rerun (run it again, same idempotency key) or fail_task"
)


def _unknown_outcome_policy(*, tool_call: ToolCall) -> PolicyDecision:
    """A re-run is the call running again: it needs what running it needed the first time,
    the strictest of its earlier reviews (approvals, the creator ban, their rules)."""
    approvals, forbid_creator = 1, False
    rules: list[dict[str, Any]] = []
    for required, forbid, matched in tool_call.reviews.values_list(
        "approvals_required", "forbid_creator", "matched_rules"
    ):
        approvals = max(approvals, required)
        forbid_creator = forbid_creator or forbid
        rules += [rule for rule in matched if rule not in rules]
    own = {"name": "unknown-outcome", "tool": tool_call.tool, "action": "review"}
    return PolicyDecision(
        action="review",
        reason="outcome unknown: mark it done, re-run it or fail the task",
        rules=[own, *(rule for rule in rules if rule != own)],
        approvals_required=approvals,
        forbid_creator=forbid_creator,
    )


def review_gate_unknown_outcome(
    *, tool_call: ToolCall, step_index: int, pause: ReviewPause, message: str | None = None
) -> NoReturn:
    """A non-idempotent call that may or may not have taken effect (its worker stopped while
    it ran, or it timed out and would not stop): a running call's outcome becomes unknown
    (`tool_unknown_outcome`), and a review of kind `unknown_outcome` asks a human to mark it
    done, re-run it or fail the task (review_resolve_unknown_outcome), unless one is pending."""
    message = message or (
        f"{tool_call.tool} (call {tool_call.call_id}) was running when its worker stopped; it "
        "is not idempotent, so whether it took effect is unknown"
    )
    events: list[TaskEvent] = []
    if tool_call.status == ToolCallStatus.RUNNING:
        finished = timezone.now()
        toolcall_transition(
            call=tool_call,
            to=ToolCallStatus.UNKNOWN_OUTCOME,
            now=finished,
            fields={"error_class": UNKNOWN_OUTCOME, "error_message": message},
            write=False,
        )
        tool_call.attempt_log = [
            *tool_call.attempt_log,
            {
                "n": tool_call.attempts,
                "started_at": tool_call.started_at.isoformat() if tool_call.started_at else None,
                "finished_at": finished.isoformat(),
                "status": UNKNOWN_OUTCOME,
                "error_class": UNKNOWN_OUTCOME,
                "error_message": message,
            },
        ]
        events.append(
            event_build(
                task_id=tool_call.task_id,
                type=EventType.TOOL_UNKNOWN_OUTCOME,
                payload={
                    "call_id": tool_call.call_id,
                    "tool": tool_call.tool,
                    "attempt": tool_call.attempts,
                },
                step_index=step_index,
            )
        )
    open_review = not tool_call.reviews.filter(status=ReviewStatus.PENDING).exists()
    decision = _unknown_outcome_policy(tool_call=tool_call)
    if open_review:
        events.append(
            event_build(
                task_id=tool_call.task_id,
                type=EventType.REVIEW_REQUESTED,
                payload={
                    "call_id": tool_call.call_id,
                    "tool": tool_call.tool,
                    "kind": UNKNOWN_OUTCOME,
                    "reason": decision.reason,
                },
                step_index=step_index,
            )
        )

    def open_unknown_outcome_review(checkpoint_id: Any) -> None:
        # A standing rule that allowed this call trusted it too far: it pauses itself.
        standing_rules_distrust(
            tool_call_ids=[tool_call.pk], cause="unknown_outcome", detail=message
        )
        if open_review:
            review_request_open(
                tool_call=tool_call,
                checkpoint_id=checkpoint_id,
                decision=decision,
                kind=UNKNOWN_OUTCOME,
                preview=f"{message}.\n\n"
                + json.dumps(tool_call.arguments, indent=2, ensure_ascii=False),
            )

    pause(events, open_unknown_outcome_review)


def review_resolve_unknown_outcome(
    *,
    review_id: Any,
    user: AbstractBaseUser,
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
      creator ban; `_unknown_outcome_policy`): until enough operators approved, each re-run
      approval is recorded and the review stays pending;
    - `fail_task`: the task fails with error class `unknown_outcome`.

    `mark_done` and `fail_task` run nothing, so one operator decides them. Every decision is
    in the audit log with who decided, what and the arguments hash of the call.

    Raises ReviewForbidden, ReviewConflict or ReviewInvalid; on any of them nothing changes."""
    if decision not in UNKNOWN_OUTCOME_DECISIONS:
        raise ReviewInvalid(
            _UNKNOWN_OUTCOME_HINT,
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
        if review.status != ReviewStatus.PENDING:
            raise ReviewConflict(f"review {review_id} is already {review.status}")
        if task.status != TaskStatus.WAITING_REVIEW:
            raise ReviewConflict(f"task is {task.status}, not waiting for review")
        now = timezone.now()
        _check_seen(review=review, seen_hash=arguments_hash, now=now)
        call = review.tool_call
        call_hash = canonical_hash(call.arguments)
        before = {"status": review.status, "call": call.status, "arguments_hash": call_hash}
        if decision == "rerun":
            _approver_check(
                review=review, task=task, user=user, act="run its calls again", what="this re-run"
            )
            if not _approval_add(
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
        approvers = list(review.approvals.values_list("user__username", flat=True))
        review_transition(
            review=review,
            to=ReviewStatus.REJECTED if decision == "fail_task" else ReviewStatus.APPROVED,
            now=now,
            fields={"decided_by": user, "comment": comment, "decision_reason": decision},
            event=event_build(
                task_id=task.id,
                type=EventType.REVIEW_DECIDED,
                actor=actor,
                step_index=task.current_step,
                payload={
                    "review_id": review.id,
                    "call_id": call.call_id,
                    "tool": review.tool,
                    "kind": UNKNOWN_OUTCOME,
                    "decision": decision,
                    "comment": comment,
                    "approvers": approvers,
                    "arguments_hash": call_hash,
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
            after={
                "status": review.status,
                "call": call.status,
                "decision": decision,
                "arguments_hash": call_hash,
                "approvers": approvers,
            },
        )
        receipt_record(
            review=review,
            decision=decision,
            actor=actor,
            user=user,
            via=via,
            now=now,
            comment=comment,
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
            _resume(
                task=task,
                review=review,
                actor=actor,
                now=now,
                reason=f"outcome of {review.tool} unknown: {decision}",
            )
    return review


# --- expiry (called by the periodic sweep) ------------------------------------------------


def reviews_cancel_pending(*, task_id: Any, comment: str) -> int:
    """Cancel the task's pending reviews (the task was canceled, or recovery moved it to a
    state where the paused call no longer waits), each with a `cancel` receipt whose comment
    says why and by whom. Call with the task row locked."""
    pending = list(
        ReviewRequest.objects.select_for_update().filter(
            task_id=task_id, status=ReviewStatus.PENDING
        )
    )
    now = timezone.now()
    for review in pending:
        review_transition(
            review=review, to=ReviewStatus.CANCELED, now=now, fields={"comment": comment}
        )
        receipt_record(
            review=review,
            decision="cancel",
            actor="system:recovery",
            via=ReceiptVia.RECOVERY,
            now=now,
            comment=comment,
        )
    return len(pending)


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
                "expires_at": review.expires_at.isoformat(),
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
    _resume(task=task, review=review, reason=f"review expired: {review.tool}", actor="", now=now)
