"""Who hears of a review, and when: the route (`review_route`), and the Notification rows
written in the transaction that opens or closes a review, handed to RQ after its commit."""

from __future__ import annotations

from datetime import datetime, timedelta

import django_rq
from django.db import transaction

from harness_base.config import RouteConfig, harness_config
from review.models import (
    STANDING_RULE,
    Notification,
    NotificationEvent,
    NotificationStatus,
    ReviewRequest,
    ReviewStatus,
)
from review.transports import LEGACY_WEBHOOK

SEND_JOB = "review.jobs.notification_send"
SEND_QUEUE = "high"
# A row handed to RQ is not handed again for this long (its job is on its way); a row being
# sent is the job's for SEND_LEASE_S (longer than any transport's timeouts), then the sweep
# takes it back (the worker died).
ENQUEUE_GRACE_S = 30.0
SEND_LEASE_S = 120.0

_CLOSED_EVENTS: dict[str, NotificationEvent] = {
    ReviewStatus.APPROVED: NotificationEvent.DECIDED,
    ReviewStatus.REJECTED: NotificationEvent.DECIDED,
    ReviewStatus.RESPONDED: NotificationEvent.DECIDED,
    ReviewStatus.EXPIRED: NotificationEvent.EXPIRED,
}
# Sent only while the review is pending.
WHILE_PENDING = (NotificationEvent.REMINDER, NotificationEvent.ESCALATED, NotificationEvent.EDITED)


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
    if review.kind == STANDING_RULE:  # it involved nobody: nobody is told
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
        review_id=review.id, status=NotificationStatus.PENDING, event__in=WHILE_PENDING
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


def notifications_plan_edited(*, review: ReviewRequest, now: datetime) -> None:
    """Inside the transaction of an approval that edited the arguments and left the review
    pending: a `review.edited` row to every channel that was told of the review or is on its
    route (each shows the edited call's effect, the edit and who made it, and binds the edited
    hash; Slack messages posted by chat.postMessage are updated in place). A later edit sends
    the row again."""
    if review.kind == STANDING_RULE:
        return
    told = set(
        Notification.objects.filter(review_id=review.id)
        .exclude(channel=LEGACY_WEBHOOK)
        .values_list("channel", flat=True)
    )
    route = review_route(review=review)
    configured = harness_config().notifications.channels
    channels = sorted(c for c in told | set(route.notify if route else []) if c in configured)
    again = Notification.objects.filter(
        review_id=review.id, event=NotificationEvent.EDITED, channel__in=channels
    )
    again.update(status=NotificationStatus.PENDING, attempts=0, last_error="", next_attempt_at=now)
    fresh = [c for c in channels if c not in set(again.values_list("channel", flat=True))]
    rows = _rows(review=review, channels=fresh, event=NotificationEvent.EDITED, due=now, now=now)
    Notification.objects.bulk_create(rows, ignore_conflicts=True)
    _enqueue_on_commit(review_id=review.id, event=NotificationEvent.EDITED)
