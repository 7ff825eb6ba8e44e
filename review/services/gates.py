"""The loop's gates: a call the policy sends to a human (review_gate), and a non-idempotent call
whose outcome is unknown (review_gate_unknown_outcome). Each moves the call, builds its events
and opens the review inside the loop's pause; the task then waits in waiting_review."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, NoReturn

from django.utils import timezone

from review.models import ReviewRequest, ReviewRule, ReviewStatus
from review.policy import PolicyDecision
from review.services.standing_rules import standing_rules_distrust
from review.services.transitions import review_request_open
from review.services.unknown_outcome import UNKNOWN_OUTCOME
from tasks.events import EventType
from tasks.models import TaskEvent, ToolCall, ToolCallStatus
from tasks.services import event_build, toolcall_transition

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
    versions: dict[str, Any] | None = None,
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
            versions=versions,
        ),
    )


def policy_asked_again(
    *, tool_call: ToolCall, name: str, reason: str, now_policy: PolicyDecision | None = None
) -> PolicyDecision:
    """Running a call again is approving it again: it needs what its earlier reviews needed
    and, given, what the policy asks now, the strictest of them (approvals, the creator ban,
    their rules after the review's own rule `name`)."""
    # A graph's call standing for its next node is new (unsaved): no earlier reviews.
    asked: list[tuple[int, bool, list[dict[str, Any]]]] = (
        list(tool_call.reviews.values_list("approvals_required", "forbid_creator", "matched_rules"))
        if tool_call.pk is not None
        else []
    )
    if now_policy is not None and now_policy.action == "review":
        asked.append((now_policy.approvals_required, now_policy.forbid_creator, now_policy.rules))
    approvals, forbid_creator = 1, False
    rules: list[dict[str, Any]] = []
    for required, forbid, matched in asked:
        approvals = max(approvals, required)
        forbid_creator = forbid_creator or forbid
        rules += [rule for rule in matched if rule not in rules]
    own = {"name": name, "tool": tool_call.tool, "action": "review"}
    return PolicyDecision(
        action="review",
        reason=reason,
        rules=[own, *(rule for rule in rules if rule != own)],
        approvals_required=approvals,
        forbid_creator=forbid_creator,
    )


def review_gate_unknown_outcome(
    *,
    tool_call: ToolCall,
    step_index: int,
    pause: ReviewPause,
    message: str | None = None,
    versions: dict[str, Any] | None = None,
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
    # A re-run is the call running again: it needs what running it needed the first time.
    decision = policy_asked_again(
        tool_call=tool_call,
        name="unknown-outcome",
        reason="outcome unknown: mark it done, re-run it or fail the task",
    )
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
                versions=versions,
            )

    pause(events, open_unknown_outcome_review)
