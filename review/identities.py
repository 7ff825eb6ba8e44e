"""Which person a notification channel's identity is: the one place a Slack user or an email
address is matched to a harness user (review.slack's clicks, review.email_links' links). Reads
only models, so that the transports' email links and the selectors can both use it.

A Slack user id someone set on their profile (ReviewerProfile, on /preferences/ or in the
admin) wins; otherwise a person is matched by a verified email only, and only when exactly
one active account has it. An account's `email` is verified by the way it is written: the
single sign-on stores one only when the provider says `email_verified: true`
(accounts.flows.oidc_login), and a local account's is set by an administrator (the admin site,
createsuperuser): nobody sets their own."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from review.models import ReviewerProfile

EMAIL_MAX = 254


def user_for_slack_id(*, slack_user_id: str) -> User | None:
    """The active user who set this Slack user id on their profile, if any."""
    profile = (
        ReviewerProfile.objects.select_related("user")
        .filter(slack_user_id=slack_user_id, user__is_active=True)
        .exclude(slack_user_id="")
        .first()
    )
    return profile.user if profile is not None else None


def users_with_verified_email(*, email: str) -> list[User]:
    """The active users whose verified email is `email` (case-insensitive): at most two, so
    that a caller can tell "exactly one" from "more than one"."""
    if not email or len(email) > EMAIL_MAX or "\x00" in email:
        return []
    return list(get_user_model().objects.filter(email__iexact=email, is_active=True)[:2])


def slack_user_id_of(*, user: User) -> str:
    """The Slack user id `user` set ("" for none)."""
    found = ReviewerProfile.objects.filter(user_id=user.pk).values_list("slack_user_id", flat=True)
    return found.first() or ""
