"""Who hears of a review, and the durable record of telling them (issue 23).

harness.yaml's `notifications.routes` (first match wins) name the channels of a review. When
a review opens, its Notification rows are written in the same transaction as the review:
`review.requested` to the route's `notify` channels, due now; `review.reminder` to the same
channels at `expires_at - remind_before_s`; `review.escalated` to `escalate_to` at
`requested_at + escalate_after_s`. When it closes (review_transition), `review.decided` or
`review.expired` rows are added and the reminders and escalations not yet sent are canceled.
The unique (review, channel, event) makes each of them one row, so it is sent at most once
however often the sweep looks (a worker killed in the middle of a send is the exception:
that one send is retried, with the same `webhook-id`).

Sending runs in an RQ job per row (`review.jobs.notification_send`, on the high queue),
enqueued after the commit; the sweep (agent/sweep.py) enqueues rows that come due (reminders,
escalations, retries) and those whose job was lost. The job writes only the Notification row:
a failed or slow channel never approves, rejects or expires anything.

Lock contract: a row changes only by a conditional UPDATE on its status (and, where the
sweep and a job could race, its `next_attempt_at`)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from harness_base.config import RouteConfig, harness_config
from harness_base.metrics import NOTIFICATION_FAILURES, metric_inc
from review.models import (
    Notification,
    NotificationEvent,
    NotificationStatus,
    ReviewRequest,
    ReviewStatus,
)
from review.rollups import review_rollups_stale
from review.selectors.page import duration_text, review_url
from review.transports import (
    LEGACY_WEBHOOK,
    PREVIEW_MAX_CHARS,
    LegacyWebhook,
    NotificationFailed,
    ReviewMessage,
    Transport,
    transport_for,
)
from tasks.canonical import canonical_hash

log = logging.getLogger(__name__)

SEND_JOB = "review.jobs.notification_send"
SEND_QUEUE = "high"
# A row handed to RQ is not handed again for this long (its job is on its way); a row being
# sent is the job's for SEND_LEASE_S (longer than any transport's timeouts), then the sweep
# takes it back (the worker died).
ENQUEUE_GRACE_S = 30.0
SEND_LEASE_S = 120.0
BACKOFF_MAX_S = 3600.0
# A review a standing rule decided involved nobody: nobody is told.
STANDING_RULE = "standing_rule"

_CLOSED_EVENTS = {
    ReviewStatus.APPROVED: NotificationEvent.DECIDED,
    ReviewStatus.REJECTED: NotificationEvent.DECIDED,
    ReviewStatus.RESPONDED: NotificationEvent.DECIDED,
    ReviewStatus.EXPIRED: NotificationEvent.EXPIRED,
}
# Sent only while the review is pending.
_WHILE_PENDING = (NotificationEvent.REMINDER, NotificationEvent.ESCALATED)


# --- routing -------------------------------------------------------------------------------


def review_route(*, review: ReviewRequest) -> RouteConfig | None:
    """The first route whose `match` fits the review: a rule it matched, its tool and risk,
    a group of the task's creator."""
    creator_groups: set[str] | None = None
    for route in harness_config().notifications.routes:
        match = route.match
        if match.rule is not None and match.rule not in review.rule_names:
            continue
        if match.tool is not None and match.tool != review.tool:
            continue
        if match.risk is not None and match.risk != review.risk:
            continue
        if match.group is not None:
            if creator_groups is None:
                creator = review.task.created_by
                creator_groups = (
                    set(creator.groups.values_list("name", flat=True)) if creator else set()
                )
            if match.group not in creator_groups:
                continue
        return route
    return None


def _rows(
    *, review: ReviewRequest, channels: list[str], event: str, due: datetime, now: datetime
) -> list[Notification]:
    kinds = harness_config().notifications.channels
    return [
        Notification(
            review=review,
            channel=name,
            kind=kinds[name].kind,
            event=event,
            created_at=now,
            next_attempt_at=due,
        )
        for name in channels
    ]


def _enqueue_on_commit(*, review_id: int, event: str) -> None:
    """After the commit, hand the review's rows of `event` due now to RQ. A failure to reach
    Redis is logged: the rows are durable and the sweep enqueues them once their grace ends."""

    def send() -> None:
        ids = Notification.objects.filter(
            review_id=review_id, event=event, status=NotificationStatus.PENDING
        ).values_list("id", flat=True)
        queue = django_rq.get_queue(SEND_QUEUE)
        for notification_id in ids:
            queue.enqueue(SEND_JOB, notification_id, result_ttl=600, failure_ttl=86400)

    transaction.on_commit(send, robust=True)


def notifications_plan_opened(*, review: ReviewRequest) -> None:
    """Write the rows of a review that just opened (inside its transaction); the ones due
    now are enqueued after the commit."""
    if review.kind == STANDING_RULE:
        return
    now = review.requested_at
    soon = now + timedelta(seconds=ENQUEUE_GRACE_S)
    rows: list[Notification] = []
    route = review_route(review=review)
    if route is not None:
        rows += _rows(
            review=review,
            channels=route.notify,
            event=NotificationEvent.REQUESTED,
            due=soon,
            now=now,
        )
        if route.remind_before_s and review.expires_at is not None:
            remind_at = review.expires_at - timedelta(seconds=route.remind_before_s)
            if remind_at > now:
                rows += _rows(
                    review=review,
                    channels=route.notify,
                    event=NotificationEvent.REMINDER,
                    due=remind_at,
                    now=now,
                )
        if route.escalate_after_s:
            escalate_at = now + timedelta(seconds=route.escalate_after_s)
            if review.expires_at is None or escalate_at < review.expires_at:
                rows += _rows(
                    review=review,
                    channels=route.escalate_to,
                    event=NotificationEvent.ESCALATED,
                    due=escalate_at,
                    now=now,
                )
    if harness_config().review_webhook_url:
        rows.append(
            Notification(
                review=review,
                channel=LEGACY_WEBHOOK,
                kind="webhook",
                event=NotificationEvent.REQUESTED,
                created_at=now,
                next_attempt_at=soon,
            )
        )
    if rows:
        Notification.objects.bulk_create(rows, ignore_conflicts=True)
        _enqueue_on_commit(review_id=review.id, event=NotificationEvent.REQUESTED)


def notifications_plan_closed(*, review: ReviewRequest, to: str, now: datetime) -> None:
    """Inside the transaction that closes a review (review_transition): cancel what was
    due only while it was pending, and tell the route's channels how it ended."""
    if review.kind == STANDING_RULE:
        return
    Notification.objects.filter(
        review_id=review.id, status=NotificationStatus.PENDING, event__in=_WHILE_PENDING
    ).update(status=NotificationStatus.CANCELED, next_attempt_at=None)
    event = _CLOSED_EVENTS.get(to)
    route = review_route(review=review) if event else None
    if event is None or route is None:
        return
    rows = _rows(
        review=review,
        channels=route.notify,
        event=event,
        due=now + timedelta(seconds=ENQUEUE_GRACE_S),
        now=now,
    )
    Notification.objects.bulk_create(rows, ignore_conflicts=True)
    _enqueue_on_commit(review_id=review.id, event=event)


# --- sending ------------------------------------------------------------------------------


def review_message(*, review: ReviewRequest, event: str, now: datetime) -> ReviewMessage:
    if review.status == ReviewStatus.PENDING and review.expires_at is not None:
        time_left = duration_text(max(0.0, (review.expires_at - now).total_seconds()))
    elif review.status == ReviewStatus.PENDING:
        time_left = "no limit"
    else:
        time_left = "closed"
    preview = review.preview or review.target
    if len(preview) > PREVIEW_MAX_CHARS:
        preview = preview[:PREVIEW_MAX_CHARS] + "\n… (truncated; the review page shows all)"
    return ReviewMessage(
        event=event,
        review_id=review.id,
        task_id=str(review.task_id),
        task_title=review.task.title,
        tool=review.tool,
        rules=tuple(review.rule_names),
        risk=review.risk,
        reason=review.reason,
        status=review.status,
        arguments_hash=canonical_hash(review.arguments),
        preview=preview,
        requested_at=review.requested_at,
        expires_at=review.expires_at,
        time_left=time_left,
        url=review_url(review_id=review.id),
    )


def channel_transport(*, name: str) -> Transport:
    config = harness_config()
    if name == LEGACY_WEBHOOK and config.review_webhook_url:
        return LegacyWebhook(config.review_webhook_url)
    channel = config.notifications.channels.get(name)
    if channel is None:
        raise NotificationFailed(f"channel {name!r} is no longer in harness.yaml")
    return transport_for(channel)


def notification_backoff_s(*, attempts: int) -> float:
    return min(settings.HARNESS_NOTIFY_RETRY_S * 2 ** (attempts - 1), BACKOFF_MAX_S)


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
    return fields["status"]


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
    row = Notification.objects.select_related("review__task").get(id=notification_id)
    review = row.review
    if row.event in _WHILE_PENDING and review.status != ReviewStatus.PENDING:
        Notification.objects.filter(id=row.id, status=NotificationStatus.SENDING).update(
            status=NotificationStatus.CANCELED, next_attempt_at=None
        )
        return NotificationStatus.CANCELED
    error = ""
    try:
        channel_transport(name=row.channel).notify(
            message=review_message(review=review, event=row.event, now=now),
            delivery_id=f"msg_review{review.id}_{row.id}",
        )
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
