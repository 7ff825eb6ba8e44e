"""Standing rules (review.standing) at work: the approval a standing rule gives a call in the
loop (review_gate_standing, a review of kind `standing_rule` decided by the rule), and the rules
that pause themselves when a call they allowed went wrong (the kill switch: rule_switch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from review.models import (
    STANDING_RULE,
    ReceiptVia,
    ReviewRequest,
    ReviewRule,
    ReviewStatus,
)
from review.policy import PolicyDecision
from review.receipts import receipt_record
from review.services.rule_switch import standing_rule_pause
from review.services.transitions import review_request_open, review_transition
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import TaskEvent, ToolCall, ToolCallStatus
from tasks.services import audit_record, event_build, toolcall_transition


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
    versions: dict[str, Any] | None = None,
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
            versions=versions,
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
            now=review.decided_at or timezone.now(),  # review_transition set it
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


def standing_rules_distrust(
    *,
    tool_call_ids: list[Any],
    cause: str,
    detail: str,
    user: User | None = None,
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
