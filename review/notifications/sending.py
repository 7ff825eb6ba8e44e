"""Sending: one row per RQ job (`notification_send`, its outcome settled by a conditional
UPDATE), and the sweep's part (`notifications_enqueue_due`)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from harness_base.metrics import NOTIFICATION_FAILURES, metric_inc
from review.models import Notification, NotificationEvent, NotificationStatus, ReviewStatus
from review.notifications.messages import channel_transport, review_message
from review.notifications.planning import (
    ENQUEUE_GRACE_S,
    SEND_JOB,
    SEND_LEASE_S,
    SEND_QUEUE,
    WHILE_PENDING,
)
from review.rollups import review_rollups_stale
from review.transports import NotificationFailed

# The name the log lines had when this was one module.
log = logging.getLogger("review.notifications")

BACKOFF_MAX_S = 3600.0


def notification_backoff_s(*, attempts: int) -> float:
    return float(min(settings.HARNESS_NOTIFY_RETRY_S * 2 ** (attempts - 1), BACKOFF_MAX_S))


def _settle(*, row: Notification, now: datetime, error: str) -> str:
    """The outcome of one attempt, written by a conditional UPDATE on `sending`."""
    if not error:
        fields: dict[str, Any] = {"status": NotificationStatus.SENT, "sent_at": now}
        fields |= {"last_error": "", "next_attempt_at": None}
    elif row.attempts >= settings.HARNESS_NOTIFY_MAX_ATTEMPTS:
        fields = {"status": NotificationStatus.FAILED, "last_error": error, "next_attempt_at": None}
    else:
        retry_at = now + timedelta(seconds=notification_backoff_s(attempts=row.attempts))
        fields = {
            "status": NotificationStatus.PENDING,
            "last_error": error,
            "next_attempt_at": retry_at,
        }
    settled = Notification.objects.filter(id=row.id, status=NotificationStatus.SENDING)
    if settled.update(**fields) and fields["status"] == NotificationStatus.FAILED:
        review_rollups_stale(requested_at=row.review.requested_at)
    status: str = fields["status"]
    return status


def _deliver(*, row: Notification, now: datetime) -> None:
    """Send one row's message. A `review.edited` row to a channel whose earlier messages can
    be updated (Slack's chat.postMessage) rewrites those instead, so none of them keeps a
    button for arguments it does not show; where went a message that can be, is recorded."""
    review = row.review
    transport = channel_transport(name=row.channel)
    if row.event == NotificationEvent.EDITED:
        posted = Notification.objects.filter(review_id=review.id, channel=row.channel).exclude(
            slack_ts=""
        )
        for earlier in posted:
            transport.update(
                message=review_message(review=review, event=earlier.event, now=now),
                posted={"channel": earlier.slack_channel, "ts": earlier.slack_ts},
            )
        if posted:
            return
    sent = transport.notify(
        message=review_message(review=review, event=row.event, now=now),
        delivery_id=f"msg_review{review.id}_{row.id}",
    )
    if sent is not None:
        Notification.objects.filter(id=row.id).update(
            slack_channel=sent["channel"][:40], slack_ts=sent["ts"][:40]
        )


def notification_send(*, notification_id: int) -> str:
    """Send one notification if it is still to be sent; returns its status after the
    attempt ("" when another job has it or it is no longer pending)."""
    now = timezone.now()
    claimed = Notification.objects.filter(
        id=notification_id, status=NotificationStatus.PENDING
    ).update(
        status=NotificationStatus.SENDING,
        attempts=F("attempts") + 1,
        last_attempt_at=now,
        next_attempt_at=now + timedelta(seconds=SEND_LEASE_S),
    )
    if not claimed:
        return ""
    row = Notification.objects.select_related("review__task", "review__edited_by").get(
        id=notification_id
    )
    review = row.review
    if row.event in WHILE_PENDING and review.status != ReviewStatus.PENDING:
        Notification.objects.filter(id=row.id, status=NotificationStatus.SENDING).update(
            status=NotificationStatus.CANCELED, next_attempt_at=None
        )
        return NotificationStatus.CANCELED
    error = ""
    try:
        _deliver(row=row, now=now)
    except NotificationFailed as exc:
        error = str(exc)[:500] or "failed"
        metric_inc(NOTIFICATION_FAILURES, channel=row.channel)
        log.warning(
            "notification %s of review %s to channel %s failed (attempt %s): %s",
            row.event,
            review.id,
            row.channel,
            row.attempts,
            error,
        )
    return _settle(row=row, now=timezone.now(), error=error)


def notifications_enqueue_due(*, now: datetime | None = None) -> int:
    """The sweep's part: take back rows whose sending worker died, then hand every due row
    to RQ, each once per ENQUEUE_GRACE_S (a duplicate job finds the row claimed and exits)."""
    now = now or timezone.now()
    Notification.objects.filter(status=NotificationStatus.SENDING, next_attempt_at__lte=now).update(
        status=NotificationStatus.PENDING, last_error="the worker stopped while sending"
    )
    due = list(
        Notification.objects.filter(
            status=NotificationStatus.PENDING, next_attempt_at__lte=now
        ).values_list("id", "next_attempt_at")[:500]
    )
    queue = django_rq.get_queue(SEND_QUEUE)
    enqueued = 0
    for notification_id, due_at in due:
        taken = Notification.objects.filter(
            id=notification_id, status=NotificationStatus.PENDING, next_attempt_at=due_at
        ).update(next_attempt_at=now + timedelta(seconds=ENQUEUE_GRACE_S))
        if taken:
            queue.enqueue(SEND_JOB, notification_id, result_ttl=600, failure_ttl=86400)
            enqueued += 1
    return enqueued
