"""Approvals checked again just before a foreign agent is resumed with them (every foreign
runner: review.recheck.interrupt_recheck - deadline, approvers, policy). One that no longer
holds is not delivered: its call awaits review again (`approvals_reasked`, on the timeline)
and a new pending review says what changed (`reviews_reopen`, inside the runner's pause)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.utils import timezone

from agent.versions import versions_current
from review.models import ReviewRequest, ReviewStatus
from review.recheck import interrupt_recheck
from review.services.transitions import review_request_open
from tasks.events import EventType
from tasks.models import ToolCall

Drifted = list[tuple[ReviewRequest, Any]]


def _tool_call(review: ReviewRequest) -> ToolCall:
    return review.tool_call


def approvals_drifted(run: Any, reviews: Iterable[ReviewRequest]) -> Drifted:
    """(review, its recheck) of each approval among `reviews` that no longer holds."""
    now = timezone.now()
    return [
        (review, check)
        for review in reviews
        if review.status == ReviewStatus.APPROVED
        for check in [interrupt_recheck(review=review, task=run.task, now=now)]
        if not check.holds
    ]


def approvals_reasked(
    run: Any,
    drifted: Drifted,
    *,
    move: Callable[[ToolCall], None],
    row_of: Callable[[ReviewRequest], ToolCall] = _tool_call,
) -> None:
    """Each drifted call moved back to awaiting review (the runner's `move`), and said so."""
    for review, check in drifted:
        row = row_of(review)
        move(row)
        run.event(
            EventType.REVIEW_REQUESTED,
            {
                "call_id": row.call_id,
                "tool": row.tool,
                "reopened_from": review.id,
                "changes": check.changes,
            },
        )


def reviews_reopen(
    run: Any,
    drifted: Drifted,
    *,
    kind: str,
    checkpoint_of: Callable[[ReviewRequest], Any],
    row_of: Callable[[ReviewRequest], ToolCall] = _tool_call,
) -> None:
    """A new pending review of each drifted call, reopened from its approval."""
    for review, check in drifted:
        review_request_open(
            tool_call=row_of(review),
            checkpoint_id=checkpoint_of(review),
            decision=check.policy,
            preview=review.preview,
            kind=kind,
            interrupt={k: v for k, v in (review.interrupt or {}).items() if k != "decision"},
            reopened_from=review,
            changes=check.changes,
            versions=versions_current(run),
        )
