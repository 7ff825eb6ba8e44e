"""Notifications (review.notifications): one review's, and each channel's health for /ops/."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from harness_base.config import harness_config
from review.models import Notification, NotificationStatus, ReviewRequest
from review.transports import LEGACY_WEBHOOK, LegacyWebhook, transport_for


def review_notifications(*, review: ReviewRequest) -> list[dict[str, Any]]:
    """The review's notifications, oldest first: {channel, kind, event, status, attempts,
    last_error, sent_at, next_attempt_at}."""
    rows = Notification.objects.filter(review_id=review.id).values(
        "channel",
        "kind",
        "event",
        "status",
        "attempts",
        "last_error",
        "sent_at",
        "next_attempt_at",
    )
    return [dict(row) for row in rows]


def notification_channels_health() -> list[dict[str, Any]]:
    """Each configured channel for /ops/: its kind, the environment variables it needs that
    this process lacks, when it last delivered, and its failed attempts since then (newest
    rows first along `notification_channel`); `failing` once they reach
    HARNESS_NOTIFY_FAILING_AFTER."""
    config = harness_config()
    transports = {
        name: transport_for(channel) for name, channel in config.notifications.channels.items()
    }
    if config.review_webhook_url:
        transports[LEGACY_WEBHOOK] = LegacyWebhook(config.review_webhook_url)
    channels = []
    for name, transport in transports.items():
        recent = Notification.objects.filter(channel=name, last_attempt_at__isnull=False).order_by(
            "-last_attempt_at"
        )[:50]
        failed_attempts, last_error, last_error_at, last_sent_at = 0, "", None, None
        for row in recent.values("status", "attempts", "last_error", "last_attempt_at", "sent_at"):
            if row["status"] == NotificationStatus.SENT:
                last_sent_at = row["sent_at"]
                break
            if row["last_error"]:
                failed_attempts += row["attempts"]
                if not last_error:
                    last_error, last_error_at = row["last_error"], row["last_attempt_at"]
        channels.append(
            {
                "name": name,
                "kind": transport.kind,
                "missing_env": transport.missing_env(),
                "last_sent_at": last_sent_at,
                "failed_attempts": failed_attempts,
                "last_error": last_error,
                "last_error_at": last_error_at,
                "failing": failed_attempts >= settings.HARNESS_NOTIFY_FAILING_AFTER,
            }
        )
    return channels
