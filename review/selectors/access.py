"""Who may decide reviews, and the permission-checked lookup of one review."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from review.models import ReviewRequest
from tasks.errors import NotFound
from tasks.selectors import user_can_view, user_in_group


def user_can_decide(user: User | None) -> bool:
    """Members of `operators`, holders of `review.decide_review` and superusers decide;
    everyone else (viewers) only reads."""
    if user is None or not user_can_view(user):
        return False
    if user.is_superuser or user_in_group(user, ("operators",)):  # groups first: see user_can_view
        return True
    return user.has_perm("review.decide_review")


def access_review(user: User, review_id: Any, *, related: bool = True) -> ReviewRequest:
    """The review `user` may read; `NotFound` for an unknown or malformed id, or a user
    without a role. `related=False`: only its id and kind, for a service that reads (and locks)
    what it needs itself, e.g. a decision, without the rows a page shows with it."""
    if not user_can_view(user):
        raise NotFound("review not found")
    rows = (
        ReviewRequest.objects.select_related(
            "task",
            "task__created_by",
            "tool_call",
            "checkpoint",
            "decided_by",
            "standing_rule",
            "claimed_by",
            "assigned_to",
            "assigned_group",
            "edited_by",
        )
        if related
        else ReviewRequest.objects.only("id", "kind")
    )
    try:
        return rows.get(id=int(review_id))
    except (ReviewRequest.DoesNotExist, ValueError, TypeError):
        raise NotFound("review not found") from None


def user_exists(*, username: str) -> bool:
    return get_user_model().objects.filter(username=username).exists()
