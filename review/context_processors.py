"""The navigation's review summary on every page (a context processor of the layout), read once per
request."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest

from harness_base.http import AuthedRequest
from review.selectors.inbox import reviews_summary
from tasks.selectors import user_can_view

# Where a request keeps its summary once read.
_SUMMARY = "_pending_reviews_summary"


def _summary(request: HttpRequest, user: User) -> dict[str, Any]:
    summary: dict[str, Any] | None = getattr(request, _SUMMARY, None)
    if summary is None:
        summary = reviews_summary(user=user)
        setattr(request, _SUMMARY, summary)
    return summary


def pending_reviews_summary(request: AuthedRequest) -> dict[str, Any]:
    """The navigation's review summary, read once per request (the layout, the task page's
    live ETag and the live review signals read it)."""
    return _summary(request, request.user)


def pending_reviews_count(request: AuthedRequest) -> int:
    """The navigation's badge: the pending reviews this user may decide (a viewer's or a
    creator's is 0, as is a review they already approved or may not approve as its creator)."""
    count: int = pending_reviews_summary(request)["decidable"]
    return count


def navigation(request: HttpRequest) -> dict[str, Any]:
    """Values the base layout shows on every page (the review inbox count joins here). A user
    without a role gets the layout (their 403 page) but not one number of the data."""
    user = request.user
    if not user_can_view(user):
        return {}
    summary = _summary(request, user)
    return {
        "nav_can_view": True,
        "nav_pending_reviews": summary["decidable"],
        "nav_reviews_latest": summary["latest"],
    }
