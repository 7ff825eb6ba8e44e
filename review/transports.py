"""Notification channels: one small class per kind behind one `notify(*, message, delivery_id)`
(the shape of healthchecks' hc/api/transports.py). A transport sends one message about one
review and raises NotificationFailed saying why it could not; it never reads or writes the
review (review/notifications.py records each send in a Notification row).

Secrets (a webhook's signing secret, Slack's webhook URL) are read from the environment
variable the channel names, when the message is sent; an error names the variable, never its
value. Operators configure the URLs (trusted, THREATS.md), so loopback and private addresses
are allowed; redirects are never followed and every request has a bounded timeout."""

from __future__ import annotations

import base64
import binascii
import json
import os
import smtplib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string
from standardwebhooks.webhooks import Webhook as StandardWebhook

from harness_base.config import (
    ChannelConfig,
    EmailChannelConfig,
    SlackChannelConfig,
    WebhookChannelConfig,
)
from review.email_links import decision_link_urls

HTTP_TIMEOUT = httpx.Timeout(10.0, connect=3.0)
# How much of a diff or a command a message carries.
PREVIEW_MAX_CHARS = 2000
# The channel name of harness.yaml's deprecated `review_webhook_url`.
LEGACY_WEBHOOK = "review_webhook_url"

EVENT_TITLES = {
    "review.requested": "Review requested",
    "review.reminder": "Reminder: review still waiting",
    "review.escalated": "Escalated: nobody has decided this review",
    "review.decided": "Review decided",
    "review.expired": "Review expired",
}


class NotificationFailed(Exception):
    """A send that did not go through; the message is what the Notification row records."""


@dataclass(frozen=True, kw_only=True)
class ReviewMessage:
    """The facts a notification carries (review.notifications.review_message builds it)."""

    event: str
    review_id: int
    task_id: str
    task_title: str
    tool: str
    rules: tuple[str, ...]
    risk: str
    reason: str
    status: str
    arguments_hash: str
    preview: str
    requested_at: datetime
    expires_at: datetime | None
    time_left: str
    url: str

    @property
    def rule(self) -> str:
        return ", ".join(self.rules)

    @property
    def title(self) -> str:
        return EVENT_TITLES.get(self.event, self.event)

    def data(self) -> dict[str, Any]:
        return {
            "review_id": self.review_id,
            "task_id": self.task_id,
            "task_title": self.task_title,
            "tool": self.tool,
            # The first rule that matched (the one that paused the call), and all of them.
            "rule": self.rules[0] if self.rules else None,
            "rules": list(self.rules),
            "risk": self.risk,
            "reason": self.reason,
            "status": self.status,
            "arguments_hash": self.arguments_hash,
            "requested_at": self.requested_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "url": self.url,
        }


def env_value(name: str, *, what: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise NotificationFailed(f"environment variable {name} ({what}) is not set")
    return value


def _post(url: str, *, content: bytes, headers: dict[str, str]) -> None:
    try:
        response = httpx.post(
            url,
            content=content,
            headers={"Content-Type": "application/json", **headers},
            timeout=HTTP_TIMEOUT,
            follow_redirects=False,
        )
    except httpx.HTTPError as exc:
        # The URL may hold a token (Slack's does): the error names only what went wrong.
        raise NotificationFailed(f"{type(exc).__name__}: {exc}"[:300]) from None
    if response.is_redirect:
        raise NotificationFailed(f"HTTP {response.status_code}: redirects are not followed")
    if not response.is_success:
        raise NotificationFailed(f"HTTP {response.status_code} from the receiver")


class Transport(ABC):
    kind = ""

    @abstractmethod
    def notify(self, *, message: ReviewMessage, delivery_id: str) -> None:
        """Send `message`; `delivery_id` is the same on every retry of one notification."""

    def missing_env(self) -> list[str]:
        """The environment variables this channel needs that this process does not have."""
        return []


class Email(Transport):
    kind = "email"

    def __init__(self, config: EmailChannelConfig) -> None:
        self.config = config

    def recipients(self) -> list[str]:
        if self.config.to:
            return list(self.config.to)
        return sorted(
            get_user_model()
            .objects.filter(groups__name=self.config.group, is_active=True)
            .exclude(email="")
            .values_list("email", flat=True)
            .distinct()
        )

    def notify(self, *, message: ReviewMessage, delivery_id: str) -> None:
        to = self.recipients()
        if not to:
            raise NotificationFailed(
                f"group {self.config.group!r} has no active member with an email address"
            )
        subject = f"[Agent Harness] {message.title}: {message.tool} in {message.task_title}"
        # One message per recipient: nobody sees who else was told, and a pending review's
        # mail carries decision links signed for its recipient alone (review.email_links).
        mails = []
        for address in to:
            links = (
                decision_link_urls(
                    review_id=message.review_id,
                    arguments_hash=message.arguments_hash,
                    email=address,
                )
                if message.status == "pending"
                else {}
            )
            context = {"message": message, "links": links}
            mail = EmailMultiAlternatives(
                # A title's line breaks would be header injection (Django refuses them).
                subject=" ".join(subject.split())[:200],
                body=render_to_string("review/notification_email.txt", context),
                from_email=settings.DEFAULT_FROM_EMAIL,
                to=[address],
                headers={"X-Harness-Notification": delivery_id},
            )
            mail.attach_alternative(
                render_to_string("review/notification_email.html", context), "text/html"
            )
            mails.append(mail)
        try:
            get_connection().send_messages(mails)
        except (smtplib.SMTPException, OSError) as exc:
            raise NotificationFailed(f"{type(exc).__name__}: {exc}"[:300]) from None


class Webhook(Transport):
    """Standard Webhooks: `webhook-id` (the same on every retry of one notification),
    `webhook-timestamp`, `webhook-signature` (v1, HMAC-SHA256 with the `whsec_` secret);
    the body is `{"type": event, "timestamp", "data": {...}}`."""

    kind = "webhook"

    def __init__(self, config: WebhookChannelConfig) -> None:
        self.config = config

    def missing_env(self) -> list[str]:
        return [] if os.environ.get(self.config.secret_env) else [self.config.secret_env]

    def notify(self, *, message: ReviewMessage, delivery_id: str) -> None:
        secret = env_value(self.config.secret_env, what="the webhook's signing secret")
        encoded = secret.removeprefix("whsec_")
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if len(key) < 16:
            raise NotificationFailed(
                f"environment variable {self.config.secret_env} is not a Standard Webhooks "
                "secret (whsec_ followed by the base64 of at least 16 bytes)"
            )
        signer = StandardWebhook(key)
        now = datetime.now().astimezone()
        body = json.dumps(
            {"type": message.event, "timestamp": now.isoformat(), "data": message.data()}
        )
        headers = {
            "webhook-id": delivery_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signer.sign(msg_id=delivery_id, timestamp=now, data=body),
        }
        _post(self.config.url, content=body.encode(), headers=headers)


class LegacyWebhook(Transport):
    """Deprecated `review_webhook_url`: the unsigned flat JSON it always sent, on
    review.requested only."""

    kind = "webhook"

    def __init__(self, url: str) -> None:
        self.url = url

    def notify(self, *, message: ReviewMessage, delivery_id: str) -> None:
        payload = {
            "event": "review_requested",
            "review_id": message.review_id,
            "task_id": message.task_id,
            "tool": message.tool,
            "risk": message.risk,
            "reason": message.reason,
            "matched_rules": list(message.rules),
            "requested_at": message.requested_at.isoformat(),
            "expires_at": message.expires_at.isoformat() if message.expires_at else None,
            "url": message.url,
        }
        _post(self.url, content=json.dumps(payload).encode(), headers={})


def slack_blocks(message: ReviewMessage) -> list[dict[str, Any]]:
    """The Block Kit message: the facts, the diff or command, and (while the review is
    pending) approve / reject buttons whose `value` carries the review id and the
    `arguments_hash` shown, plus a link to the review page."""

    def text(value: str) -> str:
        # Slack's mrkdwn: &, < and > are its only control characters.
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    facts = [
        f"*Task:* {text(message.task_title)}",
        f"*Tool:* `{text(message.tool)}`",
        f"*Rule:* {text(message.rule or '-')}",
        f"*Risk:* {text(message.risk)}",
        f"*Time left:* {text(message.time_left)}",
        f"*Status:* {text(message.status)}",
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": message.title[:150]}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in facts]},
    ]
    if message.reason:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"*Why:* {text(message.reason)}"},
            }
        )
    if message.preview:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"```{text(message.preview[:2800])}```"},
            }
        )
    value = json.dumps({"review_id": message.review_id, "arguments_hash": message.arguments_hash})
    buttons: list[dict[str, Any]] = []
    if message.status == "pending":
        buttons += [
            {
                "type": "button",
                "action_id": "review_approve",
                "style": "primary",
                "text": {"type": "plain_text", "text": "Approve"},
                "value": value,
            },
            {
                "type": "button",
                "action_id": "review_reject",
                "style": "danger",
                "text": {"type": "plain_text", "text": "Reject"},
                "value": value,
            },
        ]
    buttons.append(
        {
            "type": "button",
            "action_id": "review_open",
            "text": {"type": "plain_text", "text": "Open review"},
            "url": message.url,
        }
    )
    blocks.append(
        {"type": "actions", "block_id": f"review-{message.review_id}", "elements": buttons}
    )
    return blocks


class Slack(Transport):
    kind = "slack"

    def __init__(self, config: SlackChannelConfig) -> None:
        self.config = config

    def missing_env(self) -> list[str]:
        names = [
            self.config.webhook_url_env,
            self.config.signing_secret_env,
            self.config.bot_token_env,
        ]
        return [name for name in names if name and not os.environ.get(name)]

    def notify(self, *, message: ReviewMessage, delivery_id: str) -> None:
        url = env_value(self.config.webhook_url_env, what="the Slack incoming webhook URL")
        if not url.startswith(("https://", "http://")):
            raise NotificationFailed(
                f"environment variable {self.config.webhook_url_env} is not an http(s) URL"
            )
        body = {
            "text": f"{message.title}: {message.tool} in {message.task_title} {message.url}",
            "blocks": slack_blocks(message),
        }
        _post(url, content=json.dumps(body).encode(), headers={})


def transport_for(config: ChannelConfig) -> Transport:
    if isinstance(config, EmailChannelConfig):
        return Email(config)
    if isinstance(config, WebhookChannelConfig):
        return Webhook(config)
    return Slack(config)
