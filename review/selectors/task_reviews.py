"""A task's reviews, for its page: the pending ones (the "waiting for your review" banner),
all of them, and the edits behind its calls."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet

from review.models import ReviewRequest, ReviewStatus
from review.selectors.facts import review_edit

_APPROVALS_MISSING = "approvals_missing"


def task_reviews_pending(*, task_id: Any) -> list[ReviewRequest]:
    """A task's pending reviews, oldest first, each with `approvals_given` and
    `approvals_missing` (the task page's "waiting for your review" banner)."""
    reviews = list(
        ReviewRequest.objects.filter(task_id=task_id, status=ReviewStatus.PENDING)
        .annotate(approvals_given=Count("approvals"))
        .order_by("requested_at", "id")
    )
    pending: list[ReviewRequest] = []
    for review in reviews:
        # Not a column of the model: the banner's own number, set on these rows only.
        missing = max(1, review.approvals_required - review.approvals_given)
        setattr(review, _APPROVALS_MISSING, missing)
        pending.append(review)
    return pending


def task_reviews(*, task_id: Any) -> QuerySet[ReviewRequest]:
    """A task's review requests, oldest first, with who decided them."""
    return (
        ReviewRequest.objects.filter(task_id=task_id)
        .select_related("decided_by", "standing_rule")
        .order_by("requested_at", "id")
    )


def task_call_edits(*, task_id: Any) -> dict[str, dict[str, Any]]:
    """call_id -> review_edit of the approved review that edited it, for the task's calls
    tab and timeline."""
    reviews = ReviewRequest.objects.filter(
        task_id=task_id, status=ReviewStatus.APPROVED, edited_arguments__isnull=False
    ).select_related("tool_call")
    edits = {}
    for review in reviews.order_by("decided_at", "id"):
        edit = review_edit(review=review)
        if edit is not None:
            edits[review.tool_call.call_id] = edit
    return edits


def task_migrations_chosen(*, task_id: Any) -> list[tuple[int, str, dict[str, Any]]]:
    """A task's `version_drift` reviews decided `migrate`, oldest first: (review id, the
    migration's name, the drift it was chosen for). The worker applies each once
    (agent.runtime.migrate, which records a `version_migrated` event naming the review)."""
    return [
        (review_id, str((choice or {}).get("migration", "")), drift or {})
        for review_id, choice, drift in ReviewRequest.objects.filter(
            task_id=task_id,
            kind="version_drift",
            status=ReviewStatus.APPROVED,
            choice__decision="migrate",
            # A migration that failed reopened its review (agent.runtime.migrate_failed).
            reopened_as__isnull=True,
        )
        .order_by("decided_at", "id")
        .values_list("id", "choice", "drift")
    ]
