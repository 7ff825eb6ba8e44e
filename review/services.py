"""Review services: opening review requests (from the agent loop) and deciding them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from review.models import ReviewRequest
from review.policy import PolicyDecision
from tasks.models import ToolCall


def review_request_open(
    *, tool_call: ToolCall, checkpoint_id: Any, decision: PolicyDecision, preview: str,
    kind: str = "policy",
) -> ReviewRequest:
    """Called by the loop inside its fenced transaction, just before the task pauses."""
    now = timezone.now()
    expires_at = (
        now + timedelta(seconds=decision.expires_after_s) if decision.expires_after_s else None
    )
    return ReviewRequest.objects.create(
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
    )
