"""Who a person is in the channels that carry reviews to them (ReviewerProfile): their Slack
user id, which maps a Slack click to them ahead of any email match (review.slack)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

# A Slack user id as Slack writes them (U0123ABCD; W… on Enterprise Grid).
SLACK_USER_ID = "^[A-Za-z0-9_]{1,64}$"


class ReviewerProfile(models.Model):
    """One row per user who set a notification identity. `slack_user_id`: the Slack user
    whose button clicks decide as this user (blank: matched by verified email only); one
    Slack user is one person."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="reviewer_profile",
    )
    slack_user_id = models.CharField(
        max_length=64,
        blank=True,
        validators=[RegexValidator(SLACK_USER_ID, "letters, digits and _ (U0123ABCD)")],
        help_text="The Slack user id (e.g. U0123ABCD; Slack: profile → ⋮ → Copy member ID) "
        "whose clicks on review buttons decide as this user; it wins over the email match.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # Serves the lookup of a click's user too.
            models.UniqueConstraint(
                fields=["slack_user_id"],
                condition=~Q(slack_user_id=""),
                name="reviewer_profile_slack_user_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: slack {self.slack_user_id or '-'}"
