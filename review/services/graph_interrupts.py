"""Reviews of LangGraph interrupts (kind `langgraph`, see agent.graph_runner): which decisions
an interrupt accepts, the policy on the action it approves, and the answer the graph resumes
with."""

from __future__ import annotations

import json
from typing import Any

from review.models import ReviewRequest, ReviewStatus
from review.policy import PolicyDecision, graph_action_policy
from review.services.errors import ReviewInvalid

# The interrupts whose `respond` is the call's result: the tool never runs and the call is
# settled by the decision (a Pydantic AI external call, a graph's tool call at a breakpoint).
# An external call's result is any JSON, up to RESPONSE_MAX_CHARS as JSON text.
ANSWERED = ("external", "breakpoint_tool")
RESPONSE_MAX_CHARS = 100_000


def graph_action_check(*, review: ReviewRequest, approved: dict[str, Any]) -> PolicyDecision:
    """The graph runs what is approved, so the policy holds for it as for a harness tool: an
    action a deny rule matches (as asked or as edited) cannot be approved, and an edit is held
    to the rules on the new arguments (`edit_tighten`). Caller holds the lock."""
    policy = graph_action_policy(tool_name=review.tool, args=approved)
    if policy.action == "deny":
        edited = approved != review.original_arguments
        raise ReviewInvalid(
            f"the policy denies this action: {policy.reason}; reject it or respond instead",
            errors=[{"field": "arguments" if edited else "decision", "message": policy.reason}],
        )
    return policy


def graph_decision_check(
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
        if len(json.dumps(response, default=str)) > RESPONSE_MAX_CHARS:
            raise ReviewInvalid(
                f"the response is longer than {RESPONSE_MAX_CHARS} characters",
                errors=[{"field": "response", "message": f"at most {RESPONSE_MAX_CHARS}"}],
            )
        if interrupt.get("mode") not in ("plain", "external") and not isinstance(response, str):
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
