"""Standing rules (review.standing) with their track record."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet

from review.models import ReviewRequest, ReviewRule, ReviewStatus, RuleKind
from tasks.errors import CANCELED_ERROR, NotFound
from tasks.models import ToolCallStatus

_ALLOWED = Q(reviews__kind="standing_rule")
# The human reviews of calls it matched and could not allow (review.services.review_gate).
_ASKED = Q(reviews__kind="policy")


def standing_rules(*, ids: list[Any] | None = None) -> QuerySet[ReviewRule]:
    """Standing rules, newest first, each with its track record counted from the reviews
    linked to it (exact: each allowance is a review of kind `standing_rule`, each call that
    matched while it could not allow is a human's review):

    - `allowed`: calls it allowed; of those `failed` (settled failed or timed out; not a
      call an operator's cancel stopped),
      `unknown_outcome` (a human had to say whether it took effect), `rolled_back`;
    - `asked_human`: calls it matched while paused (or unable to stand in); of those the
      human `edited` or `rejected`."""
    rules = ReviewRule.objects.filter(kind=RuleKind.STANDING)
    if ids is not None:
        rules = rules.filter(id__in=ids)
    return (
        rules.select_related("created_by", "scope_user", "revoked_by", "origin_review")
        .annotate(
            allowed=Count("reviews", filter=_ALLOWED, distinct=True),
            failed=Count(
                "reviews",
                filter=_ALLOWED
                & Q(
                    reviews__tool_call__status__in=[
                        ToolCallStatus.FAILED,
                        ToolCallStatus.TIMED_OUT,
                    ]
                )
                & ~Q(reviews__tool_call__error_class=CANCELED_ERROR),
                distinct=True,
            ),
            unknown_outcome=Count(
                "reviews",
                filter=_ALLOWED & Q(reviews__tool_call__reviews__kind="unknown_outcome"),
                distinct=True,
            ),
            rolled_back=Count(
                "reviews", filter=_ALLOWED & Q(reviews__rolled_back_at__isnull=False), distinct=True
            ),
            asked_human=Count("reviews", filter=_ASKED, distinct=True),
            edited=Count(
                "reviews",
                filter=_ASKED
                & Q(reviews__status=ReviewStatus.APPROVED, reviews__edited_arguments__isnull=False),
                distinct=True,
            ),
            rejected=Count(
                "reviews", filter=_ASKED & Q(reviews__status=ReviewStatus.REJECTED), distinct=True
            ),
        )
        .order_by("-id")
    )


def standing_rules_from(*, review: ReviewRequest) -> list[ReviewRule]:
    """The standing rules made when this review was approved ("approve and always allow")."""
    return list(ReviewRule.objects.filter(kind=RuleKind.STANDING, origin_review=review))


def standing_rule_get(*, rule_id: Any) -> ReviewRule:
    try:
        return standing_rules(ids=[int(rule_id)]).get()
    except (ReviewRule.DoesNotExist, ValueError, TypeError):
        raise NotFound("standing rule not found") from None
