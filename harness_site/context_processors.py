from __future__ import annotations

from django.http import HttpRequest


def navigation(request: HttpRequest) -> dict:
    """Values the base layout shows on every page (the review inbox count joins here)."""
    if not request.user.is_authenticated:
        return {}
    from review.selectors import reviews_pending_count

    return {"nav_pending_reviews": reviews_pending_count()}
