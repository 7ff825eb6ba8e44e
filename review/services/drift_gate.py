"""The loop's gate for drift that touches a paused call (issue #43): the call does not run and
awaits a review of kind `version_drift` (decided by review.services.version_drift)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from review.models import ReviewRequest
from review.policy import PolicyDecision
from review.services.gates import policy_asked_again
from review.services.transitions import review_request_open
from tasks.events import EventType
from tasks.models import TaskEvent, ToolCall, ToolCallStatus
from tasks.services import audit_record, event_build, toolcall_transition

VERSION_DRIFT = "version_drift"


def version_drift_request(
    *,
    tool_call: ToolCall,
    step_index: int,
    drift: dict[str, Any],
    policy: PolicyDecision | None,
    versions: dict[str, Any] | None = None,
    reopened_from: ReviewRequest | None = None,
    changes: list[str] | None = None,
) -> tuple[TaskEvent, Callable[[Any], Any]]:
    """The call does not run: whatever approved it was given under other code. -> (its
    `review_requested` event, `open(checkpoint_id)`: the `version_drift` review, opened against
    the checkpoint the pause writes, carrying `drift`; `versions`: the code it opens under).
    For a runner that pauses for several such calls at once (review_gate_version_drift: one).
    `reopened_from`: the version_drift review whose choice could not be carried out (a
    migration that failed), reopened saying why (`changes`), audited."""
    if tool_call.status != ToolCallStatus.AWAITING_REVIEW:
        toolcall_transition(call=tool_call, to=ToolCallStatus.AWAITING_REVIEW, write=False)
    # Going on under new code is approving the call again, under today's policy too.
    decision = policy_asked_again(
        tool_call=tool_call,
        name=VERSION_DRIFT,
        reason="the code changed: continue, migrate, restart or cancel",
        now_policy=policy,
    )
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
            **({"reopened_from": reopened_from.id, "changes": changes} if reopened_from else {}),
        },
        step_index=step_index,
    )

    def open_review(checkpoint_id: Any) -> Any:
        review = review_request_open(
            tool_call=tool_call,
            checkpoint_id=checkpoint_id,
            decision=decision,
            kind=VERSION_DRIFT,
            preview="The code changed under this call:\n"
            + "\n".join(f"- {line}" for line in drift.get("touches") or []),
            drift=drift,
            versions=versions,
            reopened_from=reopened_from,
            changes=changes,
        )
        if reopened_from is not None:
            audit_record(
                user=None,
                action="review_reopened",
                task_id=tool_call.task_id,
                target=f"review {review.id}",
                reason="; ".join(changes or [])[:2000],
                before={"review": reopened_from.id, "choice": reopened_from.choice},
                after={"review": review.id, "status": review.status},
                actor_name="worker",
            )
        return review

    return requested, open_review


def review_gate_version_drift(
    *,
    tool_call: ToolCall,
    step_index: int,
    drift: dict[str, Any],
    policy: PolicyDecision | None,
    pause: Callable[[list[TaskEvent], Callable[[Any], Any]], NoReturn],
    versions: dict[str, Any] | None = None,
    reopened_from: ReviewRequest | None = None,
    changes: list[str] | None = None,
) -> NoReturn:
    """The call does not run: it awaits a `version_drift` review (version_drift_request),
    opened by `pause` with the checkpoint it writes."""
    requested, open_review = version_drift_request(
        tool_call=tool_call,
        step_index=step_index,
        drift=drift,
        policy=policy,
        versions=versions,
        reopened_from=reopened_from,
        changes=changes,
    )
    pause([requested], open_review)
