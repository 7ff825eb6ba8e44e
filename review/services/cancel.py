"""Canceling a task's pending reviews undecided (a cancel, retry or rollback moved the task on)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from review.models import ReceiptVia, ReviewRequest, ReviewStatus
from review.receipts import receipt_record
from review.services.transitions import review_transition


def reviews_cancel_pending(*, task_id: Any, comment: str) -> int:
    """Cancel the task's pending reviews (the task was canceled, or recovery moved it to a
    state where the paused call no longer waits), each with a `cancel` receipt whose comment
    says why and by whom. Call with the task row locked."""
    pending = list(
        ReviewRequest.objects.select_for_update().filter(
            task_id=task_id, status=ReviewStatus.PENDING
        )
    )
    now = timezone.now()
    for review in pending:
        review_transition(
            review=review, to=ReviewStatus.CANCELED, now=now, fields={"comment": comment}
        )
        receipt_record(
            review=review,
            decision="cancel",
            actor="system:recovery",
            via=ReceiptVia.RECOVERY,
            now=now,
            comment=comment,
        )
    return len(pending)
