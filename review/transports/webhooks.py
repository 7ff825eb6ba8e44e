"""Webhooks: signed per Standard Webhooks (Webhook), and the deprecated unsigned
`review_webhook_url` (LegacyWebhook)."""

from __future__ import annotations

import base64
import binascii
import json
import os
from datetime import datetime

from standardwebhooks.webhooks import Webhook as StandardWebhook

from harness_base.config import WebhookChannelConfig
from review.transports.base import NotificationFailed, ReviewMessage, Transport, env_value, post


class Webhook(Transport):
    """Standard Webhooks: `webhook-id` (the same on every retry of one notification),
    `webhook-timestamp`, `webhook-signature` (v1, HMAC-SHA256 with the `whsec_` secret);
    the body is `{"type": event, "timestamp", "data": {...}}`."""

    kind = "webhook"

    def __init__(self, config: WebhookChannelConfig) -> None:
        self.config = config

    def missing_env(self) -> list[str]:
        return [] if os.environ.get(self.config.secret_env) else [self.config.secret_env]

    def notify(self, *, message: ReviewMessage, delivery_id: str) -> dict[str, str] | None:
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
        post(self.config.url, content=body.encode(), headers=headers)
        return None


class LegacyWebhook(Transport):
    """Deprecated `review_webhook_url`: the unsigned flat JSON it always sent, on
    review.requested only."""

    kind = "webhook"

    def __init__(self, url: str) -> None:
        self.url = url

    def notify(self, *, message: ReviewMessage, delivery_id: str) -> dict[str, str] | None:
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
        post(self.url, content=json.dumps(payload).encode(), headers={})
        return None
