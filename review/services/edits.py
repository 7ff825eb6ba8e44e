"""Edited arguments in an approval: checked against the tool's schema and the policy, and the
stricter of the old and new requirements applied; and what they would do, previewed before an
operator approves them."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from review.models import ReviewRequest, ReviewStatus
from review.policy import PolicyDecision, evaluate
from review.previews import review_preview
from review.services.errors import ReviewConflict, ReviewInvalid
from tasks.selectors import task_tool
from tasks.tools.registry import ToolSpec


def _field_errors(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(["arguments", *(str(p) for p in item["loc"])]), "message": item["msg"]}
        for item in exc.errors()
    ]


def edit_validate(
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
    return edit_policy(tool=tool, arguments=arguments, spec=spec)


def edit_policy(
    *, tool: ToolSpec, arguments: dict[str, Any], spec: dict[str, Any]
) -> PolicyDecision:
    """The policy on edited arguments: a deny is ReviewInvalid; else its decision, which the
    edit is held to (edit_tighten)."""
    policy = evaluate(tool=tool, args=arguments, spec=spec)
    if policy.action == "deny":
        raise ReviewInvalid(
            f"the policy denies these arguments: {policy.reason}",
            errors=[{"field": "arguments", "message": policy.reason}],
        )
    return policy


def edit_tighten(*, review: ReviewRequest, edit: PolicyDecision) -> None:
    """An edit is held to the policy on the new arguments as well as the old: the stricter
    of the two applies (more approvals, creator ban). Caller holds the lock."""
    if edit.action != "review":
        return
    review.approvals_required = max(review.approvals_required, edit.approvals_required)
    review.forbid_creator = review.forbid_creator or edit.forbid_creator
    review.matched_rules = review.matched_rules + [
        rule for rule in edit.rules if rule not in review.matched_rules
    ]


def edit_preview(*, review: ReviewRequest, arguments: Any) -> str:
    """What the review's call would do with `arguments` an operator edited, before they
    approve them ("Preview edit"): checked as an approval checks them (edit_validate), then
    previewed by the function the pause used, against the call's targets as they are now
    (review.previews). Reads only; raises ReviewInvalid (bad arguments) or ReviewConflict
    (decided, a LangGraph interrupt's edit, a tool gone)."""
    if review.status != ReviewStatus.PENDING:
        raise ReviewConflict(f"this review is {review.status}: there is nothing to preview")
    if review.interrupt is not None:
        raise ReviewConflict("a LangGraph interrupt's edit is the graph's to interpret: no preview")
    edit_validate(
        task_id=review.task_id, tool_name=review.tool, arguments=arguments, spec=review.task.spec
    )
    text, _fingerprint = review_preview(review=review, arguments=arguments)
    return text
