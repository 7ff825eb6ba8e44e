"""Notifications about reviews, and the signed email decision links used."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from review.models.request import ReviewRequest


class NotificationEvent(models.TextChoices):
    REQUESTED = "review.requested"
    # `remind_before_s` before the review expires, if it is still pending.
    REMINDER = "review.reminder"
    # `escalate_after_s` after it opened, still pending: to the route's `escalate_to`.
    ESCALATED = "review.escalated"
    # An approval that needs another one edited the arguments: what the channels were shown
    # is no longer what a decision approves (a Slack message posted with chat.postMessage is
    # updated in place; other channels get a message showing the edited call).
    EDITED = "review.edited"
    DECIDED = "review.decided"
    EXPIRED = "review.expired"


class NotificationStatus(models.TextChoices):
    # Due at `next_attempt_at` (a reminder's time, or the next retry).
    PENDING = "pending"
    # Claimed by a send job until `next_attempt_at`; past it, the sweep makes it pending again.
    SENDING = "sending"
    SENT = "sent"
    # Gave up after HARNESS_NOTIFY_MAX_ATTEMPTS.
    FAILED = "failed"
    # The review closed before it was due (a reminder or an escalation).
    CANCELED = "canceled"


class Notification(models.Model):
    """One message about one review to one channel (review/notifications/). At most one per
    (review, channel, event): a reminder or an escalation is sent once, however often workers
    restart or the sweep looks. Sending never touches the review."""

    review = models.ForeignKey(
        ReviewRequest, on_delete=models.CASCADE, related_name="notifications"
    )
    # The channel's name in harness.yaml and its kind (email | webhook | slack).
    channel = models.CharField(max_length=64)
    kind = models.CharField(max_length=20)
    event = models.CharField(max_length=30, choices=NotificationEvent.choices)
    status = models.CharField(
        max_length=20, choices=NotificationStatus.choices, default=NotificationStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    # Where a Slack message posted by chat.postMessage went (its channel id and `ts`): what
    # chat.update rewrites when the review's arguments are edited. Empty for other sends.
    slack_channel = models.CharField(max_length=40, blank=True, default="")
    slack_ts = models.CharField(max_length=40, blank=True, default="")

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["review", "channel", "event"], name="notification_review_channel_event"
            ),
        ]
        indexes = [
            # The sweep's due rows.
            models.Index(fields=["status", "next_attempt_at"], name="notification_due"),
            # /ops/: each channel's latest attempts.
            models.Index(fields=["channel", "-last_attempt_at"], name="notification_channel"),
        ]

    def __str__(self) -> str:
        return f"{self.event} of review {self.review_id} to {self.channel} ({self.status})"


class DecisionLinkUse(models.Model):
    """A signed email decision link that was used (review.email_links): the approve and reject
    links one mail gives one person share a nonce, so one of them decides once, ever."""

    nonce = models.CharField(max_length=64, unique=True)
    review = models.ForeignKey(ReviewRequest, on_delete=models.CASCADE, related_name="link_uses")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    decision = models.CharField(max_length=20)
    used_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"link {self.decision} of review {self.review_id} used by {self.user_id}"
