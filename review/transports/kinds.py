"""`transport_for`: the transport of a configured channel, by its kind."""

from __future__ import annotations

from harness_base.config import ChannelConfig, EmailChannelConfig, WebhookChannelConfig
from review.transports.base import Transport
from review.transports.mail import Email
from review.transports.slack import Slack
from review.transports.webhooks import Webhook


def transport_for(config: ChannelConfig) -> Transport:
    if isinstance(config, EmailChannelConfig):
        return Email(config)
    if isinstance(config, WebhookChannelConfig):
        return Webhook(config)
    return Slack(config)
