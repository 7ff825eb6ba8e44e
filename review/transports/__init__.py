"""Notification channels: one small class per kind behind one `notify(*, message, delivery_id)`
(the shape of healthchecks' hc/api/transports.py). A transport sends one message about one
review and raises NotificationFailed saying why it could not; it never reads or writes the
review (review/notifications/ records each send in a Notification row).

Secrets (a webhook's signing secret, Slack's webhook URL) are read from the environment
variable the channel names, when the message is sent; an error names the variable, never its
value. Operators configure the URLs (trusted, THREATS.md), so loopback and private addresses
are allowed; redirects are never followed and every request has a bounded timeout.

The modules, from the bottom: `base` (ReviewMessage, NotificationFailed, Transport, env_value,
post), one module per kind: `mail` (Email), `webhooks` (Webhook, LegacyWebhook), `slack`
(Slack, slack_blocks); and `kinds` (transport_for). Callers import from this package.
"""

from __future__ import annotations

from review.transports.base import (
    EVENT_TITLES,
    HTTP_TIMEOUT,
    LEGACY_WEBHOOK,
    PREVIEW_MAX_CHARS,
    NotificationFailed,
    ReviewMessage,
    Transport,
    env_value,
)
from review.transports.kinds import transport_for
from review.transports.mail import Email
from review.transports.slack import Slack, slack_blocks
from review.transports.webhooks import LegacyWebhook, Webhook

__all__ = [
    "EVENT_TITLES",
    "HTTP_TIMEOUT",
    "LEGACY_WEBHOOK",
    "PREVIEW_MAX_CHARS",
    "Email",
    "LegacyWebhook",
    "NotificationFailed",
    "ReviewMessage",
    "Slack",
    "Transport",
    "Webhook",
    "env_value",
    "slack_blocks",
    "transport_for",
]
