"""Review outcomes per tool: review requests opened in a window and put to a person."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q

from dashboard.windows import Window
from review.models import ReviewRequest, ReviewStatus


def review_outcomes(window: Window) -> list[dict[str, Any]]:
    """[{tool, approved, edited, rejected, expired, canceled, pending}] — review requests
    opened in the window and put to a person (not the calls a standing rule approved);
    `edited` = approved with edited arguments."""
    R = ReviewStatus
    approved = Q(status=R.APPROVED)
    return list(
        ReviewRequest.objects.filter(requested_at__gte=window.since, requested_at__lt=window.until)
        .exclude(kind="standing_rule")
        .values("tool")
        .annotate(
            approved=Count("status", filter=approved & Q(edited_arguments__isnull=True)),
            edited=Count("status", filter=approved & Q(edited_arguments__isnull=False)),
            rejected=Count("status", filter=Q(status=R.REJECTED)),
            expired=Count("status", filter=Q(status=R.EXPIRED)),
            canceled=Count("status", filter=Q(status=R.CANCELED)),
            pending=Count("status", filter=Q(status=R.PENDING)),
        )
        .order_by("tool")
    )
