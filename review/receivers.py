"""The review app's answers to the core's domain events (tasks.signals), connected by
ReviewConfig.ready(): recovery and retention (checkpoints) reach reviews through them, without
importing this app."""

from __future__ import annotations

from typing import Any

from review.models import ReviewRequest, ReviewStatus
from review.services.cancel import reviews_cancel_pending
from review.services.outcomes import review_outcomes_recount
from review.services.standing_rules import standing_rules_distrust


def on_history_superseded(*, task_id: Any, comment: str, **_: Any) -> int:
    return reviews_cancel_pending(task_id=task_id, comment=comment)


def on_calls_undone(*, tool_call_ids: list[Any], cause: str, detail: str, **_: Any) -> int:
    return standing_rules_distrust(tool_call_ids=tool_call_ids, cause=cause, detail=detail)


def on_checkpoints_needed(*, task_id: Any, **_: Any) -> list[Any]:
    """The checkpoints the task's open reviews refer to (a decision resumes from them)."""
    return list(
        ReviewRequest.objects.filter(
            task_id=task_id, status=ReviewStatus.PENDING, checkpoint__isnull=False
        ).values_list("checkpoint_id", flat=True)
    )


def on_review_outcomes_recount(*, task_id: Any, live_call_ids: list[str], **_: Any) -> Any:
    return review_outcomes_recount(task_id=task_id, live_call_ids=live_call_ids)
