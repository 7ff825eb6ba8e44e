"""Who hears of a review, and the durable record of telling them (issue 23).

harness.yaml's `notifications.routes` (first match wins) name the channels of a review. When
a review opens, its Notification rows are written in the same transaction as the review:
`review.requested` to the route's `notify` channels, due now; `review.reminder` to the same
channels at `expires_at - remind_before_s`; `review.escalated` to `escalate_to` at
`requested_at + escalate_after_s`. When it closes (review_transition), `review.decided` or
`review.expired` rows are added and the reminders and escalations not yet sent are canceled.
When an approval edits the arguments and another approval is still needed, `review.edited`
rows go to every channel told of the review (Slack messages sent by chat.postMessage are
updated in place instead): what a channel shows is then the edited call, whose hash its
buttons and links bind.
The unique (review, channel, event) makes each of them one row, so it is sent at most once
however often the sweep looks (a worker killed in the middle of a send is the exception:
that one send is retried, with the same `webhook-id`).

Sending runs in an RQ job per row (`review.jobs.notification_send`, on the high queue),
enqueued after the commit; the sweep (agent/sweep/) enqueues rows that come due (reminders,
escalations, retries) and those whose job was lost. The job writes only the Notification row:
a failed or slow channel never approves, rejects or expires anything.

Lock contract: a row changes only by a conditional UPDATE on its status (and, where the
sweep and a job could race, its `next_attempt_at`).

The modules, from the bottom: `messages` (review_message, channel_transport), `planning`
(review_route, the rows of a review that opens or closes) and `sending` (notification_send,
notifications_enqueue_due). Callers import from this package.
"""

from __future__ import annotations

from review.models import STANDING_RULE
from review.notifications.messages import channel_transport, review_message
from review.notifications.planning import (
    ENQUEUE_GRACE_S,
    SEND_JOB,
    SEND_LEASE_S,
    SEND_QUEUE,
    WHILE_PENDING,
    notifications_plan_closed,
    notifications_plan_edited,
    notifications_plan_opened,
    review_route,
)
from review.notifications.sending import (
    BACKOFF_MAX_S,
    notification_backoff_s,
    notification_send,
    notifications_enqueue_due,
)

__all__ = [
    "BACKOFF_MAX_S",
    "ENQUEUE_GRACE_S",
    "SEND_JOB",
    "SEND_LEASE_S",
    "SEND_QUEUE",
    "STANDING_RULE",
    "WHILE_PENDING",
    "channel_transport",
    "notification_backoff_s",
    "notification_send",
    "notifications_enqueue_due",
    "notifications_plan_closed",
    "notifications_plan_edited",
    "notifications_plan_opened",
    "review_message",
    "review_route",
]
