from __future__ import annotations

from review.models import ReviewRequest, ReviewStatus


def reviews_pending_count() -> int:
    return ReviewRequest.objects.filter(status=ReviewStatus.PENDING).count()
