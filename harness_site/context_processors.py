from __future__ import annotations

from django.http import HttpRequest

from review.selectors import reviews_pending_count


def pending_reviews_count(request: HttpRequest) -> int:
    """The navigation's review count, counted once per request (the layout and the task
    page's live ETag both read it)."""
    if not hasattr(request, "_pending_reviews_count"):
        request._pending_reviews_count = reviews_pending_count()
    return request._pending_reviews_count


def navigation(request: HttpRequest) -> dict:
    """Values the base layout shows on every page (the review inbox count joins here)."""
    if not request.user.is_authenticated:
        return {}
    return {"nav_pending_reviews": pending_reviews_count(request)}
