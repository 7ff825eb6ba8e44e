"""The navigation's review summary on every page (a context processor of the layout), read once per
request."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from review.selectors.inbox import reviews_summary
from tasks.selectors import user_can_view


def pending_reviews_summary(request: HttpRequest) -> dict[str, Any]:
    """The navigation's review summary, read once per request (the layout, the task page's
    live ETag and the live review signals read it)."""
    if not hasattr(request, "_pending_reviews_summary"):
        request._pending_reviews_summary = reviews_summary(user=request.user)
    return request._pending_reviews_summary


def pending_reviews_count(request: HttpRequest) -> int:
    """The navigation's badge: the pending reviews this user may decide (a viewer's or a
    creator's is 0, as is a review they already approved or may not approve as its creator)."""
    return pending_reviews_summary(request)["decidable"]


def navigation(request: HttpRequest) -> dict:
    """Values the base layout shows on every page (the review inbox count joins here). A user
    without a role gets the layout (their 403 page) but not one number of the data."""
    if not user_can_view(request.user):
        return {}
    summary = pending_reviews_summary(request)
    return {
        "nav_can_view": True,
        "nav_pending_reviews": summary["decidable"],
        "nav_reviews_latest": summary["latest"],
    }
