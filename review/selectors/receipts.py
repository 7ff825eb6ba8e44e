"""Decision receipts (review.receipts): one review's, and the chain in order for the export."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from review.models import DecisionReceipt, ReviewRequest


def review_receipts(*, review: ReviewRequest) -> QuerySet[DecisionReceipt]:
    """The decision receipts of one review, oldest first (review.receipts)."""
    return DecisionReceipt.objects.filter(review_id=review.id).order_by("seq")


def receipts_since(
    *, after_seq: int | None = None, since: datetime | None = None
) -> QuerySet[DecisionReceipt]:
    """Receipts in chain order: those after sequence number `after_seq`, or made at or after
    `since` (the export; `seq` is unique, `at` indexed)."""
    qs = DecisionReceipt.objects.order_by("seq")
    if after_seq is not None:
        qs = qs.filter(seq__gt=after_seq)
    if since is not None:
        qs = qs.filter(at__gte=since)
    return qs
