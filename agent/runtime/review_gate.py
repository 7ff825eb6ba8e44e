"""A call that waits for a human: the review service gates it (review.services), and the run
pauses in waiting_review with a `before_review` checkpoint in the same write."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from agent.runtime.run import Run
from review.policy import PolicyDecision
from review.services import ReviewPause, review_gate, review_gate_unknown_outcome
from tasks.models import TaskEvent, ToolCall
from tasks.states import TaskStatus
from tasks.tools.registry import ToolSpec


def _pause_for_human(run: Run, row: ToolCall, *, reason: str) -> ReviewPause:
    """The pause a review gate ends the job with (review.services.ReviewPause)."""

    def pause(events: list[TaskEvent], open_review: Any) -> NoReturn:
        run.pending_events.extend(events)
        run.pause(
            to=TaskStatus.WAITING_REVIEW,
            trigger="before_review",
            reason=reason,
            extra=[row],
            then=lambda checkpoint: open_review(checkpoint.id if checkpoint else None),
        )

    return pause


def pause_for_review(
    run: Run, row: ToolCall, tool: ToolSpec, args: Any, decision: PolicyDecision
) -> NoReturn:
    """The policy said `review`: show the reviewer what the call would do (the tool's own
    preview, else its arguments) and pause until a human decides."""
    if tool.preview is not None:
        try:
            preview = tool.preview(run.tool_context(row), args)
        except Exception as exc:  # a preview must never block the pause
            preview = f"(preview unavailable: {exc})"
    else:
        preview = json.dumps(row.arguments, indent=2, ensure_ascii=False)
    review_gate(
        tool_call=row,
        decision=decision,
        preview=preview,
        step_index=run.state.step_index,
        pause=_pause_for_human(run, row, reason=f"review: {tool.name}"),
    )


def escalate_unknown_outcome(run: Run, row: ToolCall, *, message: str | None = None) -> NoReturn:
    """A non-idempotent call that may have taken effect: a human decides what happened."""
    review_gate_unknown_outcome(
        tool_call=row,
        step_index=run.state.step_index,
        message=message,
        pause=_pause_for_human(run, row, reason=f"unknown outcome: {row.tool}"),
    )
