"""The gate of a plan task's dry run (agent.runtime.plan): when it ends, its intended effects
go to one review of kind `plan` (decided by review.services.plans)."""

from __future__ import annotations

from typing import Any, NoReturn

from review.policy import PolicyDecision
from review.selectors.plans import PLAN
from review.services.gates import ReviewPause
from review.services.transitions import review_request_open
from tasks.events import EventType
from tasks.models import TaskEvent, ToolCall, ToolCallStatus
from tasks.services import event_build, toolcall_transition


def review_gate_plan(
    *, tool_call: ToolCall, plan: dict[str, Any], step_index: int, pause: ReviewPause
) -> NoReturn:
    """A plan task's dry run ended: its intended effects (`plan`) go to one review, opened on
    the row standing for the plan (`tool_call`, tool `plan`), in the pause's write."""
    toolcall_transition(call=tool_call, to=ToolCallStatus.AWAITING_REVIEW, write=False)
    items = plan["items"]
    decision = PolicyDecision(
        action="review",
        reason=f"plan: {len(items)} intended effect{'s' if len(items) != 1 else ''}",
        rules=[{"name": "plan", "action": "review", "source": "built-in"}],
        approvals_required=max([1, *(item["approvals_required"] for item in items)]),
        forbid_creator=any(item["forbid_creator"] for item in items),
    )
    requested: TaskEvent = event_build(
        task_id=tool_call.task_id,
        type=EventType.REVIEW_REQUESTED,
        payload={
            "call_id": tool_call.call_id,
            "tool": tool_call.tool,
            "kind": PLAN,
            "plan_hash": plan["plan_hash"],
            "items": len(items),
            "reason": decision.reason,
        },
        step_index=step_index,
    )
    preview = "\n\n".join(f"[{item['id']}] {item['tool']}\n{item['preview']}" for item in items)
    pause(
        [requested],
        lambda checkpoint_id: review_request_open(
            tool_call=tool_call,
            checkpoint_id=checkpoint_id,
            decision=decision,
            preview=preview,
            kind=PLAN,
            plan=plan,
        ),
    )
