"""The review policy of a compensating call (a rollback undoing an effect outside the
workspace): the policy evaluated for the compensating call as for any call, and a compensation
of a call that was reviewed is reviewed too unless a rule explicitly allows it — an undo is as
consequential as what it undoes. A tool this process cannot describe is reviewed."""

from __future__ import annotations

from typing import Any

from review.models import ReviewRequest
from review.policy import PolicyDecision, evaluate
from tasks.models import Task, ToolCall
from tasks.tools.registry import ToolSpec

COMPENSATION_OF_REVIEWED = PolicyDecision(
    action="review",
    rules=[
        {
            "name": "compensation-of-reviewed-call",
            "action": "review",
            "source": "built-in",
        }
    ],
    reason="it undoes a call that was reviewed, and no rule allows it",
)
UNDESCRIBED = PolicyDecision(
    action="review",
    rules=[{"name": "compensation-tool-unknown", "action": "review", "source": "built-in"}],
    reason="the compensating tool cannot be described here, so no rule can allow it",
)


def original_reviewed(call: ToolCall) -> bool:
    """A person (or a standing rule in their name) decided the call before it ran."""
    return ReviewRequest.objects.filter(tool_call=call).exclude(kind="unknown_outcome").exists()


def compensation_policy(
    *, task: Task, call: ToolCall, tool: ToolSpec | None, arguments: dict[str, Any]
) -> PolicyDecision:
    """The decision for the call compensating `call` with `tool(arguments)`."""
    if tool is None:
        return UNDESCRIBED
    decision = evaluate(tool=tool, args=arguments, spec=task.spec)
    if decision.action == "allow" and not decision.rules and original_reviewed(call):
        return COMPENSATION_OF_REVIEWED
    return decision


def on_compensation_review(
    *, task: Task, call: ToolCall, tool: ToolSpec | None, arguments: dict[str, Any], **_: Any
) -> bool:
    """tasks.signals.compensation_review: a deny pauses too (a person sees why it cannot run)."""
    return (
        compensation_policy(task=task, call=call, tool=tool, arguments=arguments).action != "allow"
    )
