"""Who a review may be assigned to: the people and the groups who can decide that review.
Assigning asks someone to decide; a group of viewers or creators, a person without the
operators' rights, the task's creator under the creator ban or someone who already approved
could never do what is asked."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db.models import Q, QuerySet

from review.models import ReviewRequest
from review.selectors.access import user_can_decide

# At most this many people are offered (the page's list).
ASSIGNEES_MAX = 1000
DECIDE = Q(permissions__codename="decide_review", permissions__content_type__app_label="review")


def _deciders() -> Q:
    """Users who may decide reviews (review.selectors.access.user_can_decide, as a query)."""
    return (
        Q(is_superuser=True)
        | Q(groups__name="operators")
        | Q(user_permissions__codename="decide_review")
        | Q(groups__permissions__codename="decide_review")
    )


def deciding_groups() -> QuerySet[Group]:
    """The groups whose members decide reviews: `operators`, or a group holding
    review.decide_review."""
    return Group.objects.filter(Q(name="operators") | DECIDE).distinct().order_by("name")


def user_may_decide_review(*, user: User, review: ReviewRequest) -> bool:
    """`user` may decide `review` now: their role, not its task's creator under the creator
    ban, not someone who already approved it."""
    if not user.is_active or not user_can_decide(user):
        return False
    if review.forbid_creator and review.task.created_by_id == user.pk:
        return False
    return not review.approvals.filter(user_id=user.pk).exists()


def review_assignees(*, review: ReviewRequest) -> tuple[list[str], list[str]]:
    """(usernames, group names) a review may be assigned to."""
    users = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(_deciders())
        .exclude(pk__in=review.approvals.values("user_id"))
        .distinct()
        .order_by("username")
    )
    if review.forbid_creator and review.task.created_by_id is not None:
        users = users.exclude(pk=review.task.created_by_id)
    return [u.get_username() for u in users[:ASSIGNEES_MAX]], list(
        deciding_groups().values_list("name", flat=True)
    )
