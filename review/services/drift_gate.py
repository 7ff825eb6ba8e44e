"""The loop's gate for drift that touches a paused call (issue #43): the call does not run and
awaits a review of kind `version_drift` (decided by review.services.version_drift)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from review.policy import PolicyDecision
from review.services.transitions import review_request_open
from tasks.events import EventType
from tasks.models import TaskEvent, ToolCall, ToolCallStatus
from tasks.services import event_build, toolcall_transition

VERSION_DRIFT = "version_drift"


def _drift_policy(*, tool_call: ToolCall, now_policy: PolicyDecision | None) -> PolicyDecision:
    """Going on under new code is approving the call again: it needs what its earlier reviews
    needed and what the policy asks now, whichever is stricter."""
    approvals, forbid_creator = 1, False
    rules: list[dict[str, Any]] = []
    # A graph's call standing for its next node is new (unsaved): no earlier reviews.
    earlier = (
        tool_call.reviews.values_list("approvals_required", "forbid_creator", "matched_rules")
        if tool_call.pk is not None
        else []
    )
    for required, forbid, matched in earlier:
        approvals = max(approvals, required)
        forbid_creator = forbid_creator or forbid
        rules += [rule for rule in matched if rule not in rules]
    if now_policy is not None and now_policy.action == "review":
        approvals = max(approvals, now_policy.approvals_required)
        forbid_creator = forbid_creator or now_policy.forbid_creator
        rules += [rule for rule in now_policy.rules if rule not in rules]
    own = {"name": VERSION_DRIFT, "tool": tool_call.tool, "action": "review"}
    return PolicyDecision(
        action="review",
        reason="the code changed: continue, migrate, restart or cancel",
        rules=[own, *(rule for rule in rules if rule != own)],
        approvals_required=approvals,
        forbid_creator=forbid_creator,
    )


def version_drift_request(
    *,
    tool_call: ToolCall,
    step_index: int,
    drift: dict[str, Any],
    policy: PolicyDecision | None,
    versions: dict[str, Any] | None = None,
) -> tuple[TaskEvent, Callable[[Any], Any]]:
    """The call does not run: whatever approved it was given under other code. -> (its
    `review_requested` event, `open(checkpoint_id)`: the `version_drift` review, opened against
    the checkpoint the pause writes, carrying `drift`; `versions`: the code it opens under).
    For a runner that pauses for several such calls at once (review_gate_version_drift: one)."""
    if tool_call.status != ToolCallStatus.AWAITING_REVIEW:
        toolcall_transition(call=tool_call, to=ToolCallStatus.AWAITING_REVIEW, write=False)
    decision = _drift_policy(tool_call=tool_call, now_policy=policy)
    requested = event_build(
        task_id=tool_call.task_id,
        type=EventType.REVIEW_REQUESTED,
        payload={
            "call_id": tool_call.call_id,
            "tool": tool_call.tool,
            "kind": VERSION_DRIFT,
            "reason": "; ".join(drift.get("touches") or [])[:500],
            "changes": drift.get("summary") or [],
            "arguments_valid": drift.get("arguments_valid"),
        },
        step_index=step_index,
    )

    def open_review(checkpoint_id: Any) -> Any:
        return review_request_open(
            tool_call=tool_call,
            checkpoint_id=checkpoint_id,
            decision=decision,
            kind=VERSION_DRIFT,
            preview="The code changed under this call:\n"
            + "\n".join(f"- {line}" for line in drift.get("touches") or []),
            drift=drift,
            versions=versions,
        )

    return requested, open_review


def review_gate_version_drift(
    *,
    tool_call: ToolCall,
    step_index: int,
    drift: dict[str, Any],
    policy: PolicyDecision | None,
    pause: Callable[[list[TaskEvent], Callable[[Any], Any]], NoReturn],
    versions: dict[str, Any] | None = None,
) -> NoReturn:
    """The call does not run: it awaits a `version_drift` review (version_drift_request),
    opened by `pause` with the checkpoint it writes."""
    requested, open_review = version_drift_request(
        tool_call=tool_call, step_index=step_index, drift=drift, policy=policy, versions=versions
    )
    pause([requested], open_review)
