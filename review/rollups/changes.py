"""A review changed, so its hour is rolled again: a first view by a user who may decide
(`review_viewed`), and any change that marks the hour stale (`review_rollups_stale`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from review.models import ReviewRequest, ReviewRolledHour, ReviewView
from review.rollups.roll import REVIEW_ROLL_LOCK
from tasks.rollups import hour_floor, roll_lock


def review_viewed(*, review: ReviewRequest, user: Any, now: datetime | None = None) -> None:
    """`user`, who may decide, opened the page of `review`: record their first view (once)."""
    if ReviewView.objects.filter(review_id=review.pk, user_id=user.pk).exists():
        return
    ReviewView.objects.bulk_create(
        [ReviewView(review_id=review.pk, user_id=user.pk, first_viewed_at=now or timezone.now())],
        ignore_conflicts=True,
    )
    review_rollups_stale(requested_at=review.requested_at)


def review_rollups_stale(*, requested_at: datetime) -> None:
    """A review opened at `requested_at` changed: roll its hour again.

    Holds the review roll lock until the (caller's) transaction ends, so that no roll can read
    the review before the change and then record the hour as fresh: a roll that already ran
    left a row to mark, a roll that runs next reads the change (as the task roll-ups'
    rollups_task_reopened). Part of the caller's transaction (no savepoint of its own)."""
    with transaction.atomic(savepoint=False):
        roll_lock(name=REVIEW_ROLL_LOCK, wait=True)
        ReviewRolledHour.objects.filter(hour=hour_floor(requested_at)).update(stale=True)
