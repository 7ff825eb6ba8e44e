"""A person's notification identities (ReviewerProfile): the Slack user id whose clicks
decide as them (review.slack matches it ahead of any email). Only an administrator maps one:
a mapping a person could set themselves would let them claim someone else's Slack id, and
that person's clicks would then decide (and be receipted) as the claimant."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from review.models import SLACK_USER_ID, ReviewerProfile
from review.services.errors import ReviewForbidden, ReviewInvalid
from tasks.services import audit_record


def reviewer_slack_id_set(*, user: User, slack_user_id: str, by: User) -> ReviewerProfile:
    """Map the Slack user `slack_user_id` to `user` ("" removes the mapping), as `by`, who
    must be an administrator (staff): ReviewForbidden otherwise; audited. Not a Slack user id,
    or one another account holds: ReviewInvalid naming `slack_user_id`."""
    if not (by.is_active and by.is_staff):
        raise ReviewForbidden("only an administrator maps a Slack user id to a person")
    value = slack_user_id.strip()
    if value and not re.fullmatch(SLACK_USER_ID, value):
        raise ReviewInvalid(
            "not a Slack user id",
            errors=[{"field": "slack_user_id", "message": "letters, digits and _ (U0123ABCD)"}],
        )
    taken = ReviewInvalid(
        "another account has this Slack user id",
        errors=[{"field": "slack_user_id", "message": "mapped to another account"}],
    )
    if value and ReviewerProfile.objects.filter(slack_user_id=value).exclude(user_id=user.pk):
        raise taken
    try:
        with transaction.atomic():
            profile = ReviewerProfile.objects.select_for_update().filter(user_id=user.pk).first()
            before = profile.slack_user_id if profile is not None else ""
            if profile is None:
                profile = ReviewerProfile.objects.create(user=user, slack_user_id=value)
            elif before != value:
                profile.slack_user_id = value
                profile.save(update_fields=["slack_user_id", "updated_at"])
            if before != value:
                audit_record(
                    user=by,
                    action="reviewer_slack_id_set",
                    target=user.get_username()[:200],
                    before={"slack_user_id": before or None},
                    after={"slack_user_id": value or None},
                )
    except IntegrityError:
        # Another account took the same id between the check and the write.
        raise taken from None
    return profile
