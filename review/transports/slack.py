"""Slack: a Block Kit message (`slack_blocks`) to an incoming webhook (the clicks on its
buttons are taken by review/slack.py)."""

from __future__ import annotations

import json
import os
from typing import Any

from harness_base.config import SlackChannelConfig
from review.transports.base import NotificationFailed, ReviewMessage, Transport, env_value, post

# Slack's limit on a header block's text.
HEADER_MAX = 150


def slack_escape(value: str) -> str:
    """Text as Slack shows it literally: &, < and > are its only control characters (a `<`
    starts a link or a mention, `<!channel>` pings everyone), in every text field, the
    message's fallback `text` included."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _header(title: str) -> str:
    """The title escaped, cut to the header's limit without splitting an entity."""
    cut = title[:HEADER_MAX]
    while len(slack_escape(cut)) > HEADER_MAX:
        cut = cut[:-1]
    return slack_escape(cut)


def slack_blocks(message: ReviewMessage) -> list[dict[str, Any]]:
    """The Block Kit message: the facts, the diff or command, and (while the review is
    pending) approve / reject buttons whose `value` carries the review id and the
    `arguments_hash` shown, plus a link to the review page."""
    text = slack_escape
    facts = [
        f"*Task:* {text(message.task_title)}",
        f"*Tool:* `{text(message.tool)}`",
        f"*Rule:* {text(message.rule or '-')}",
        f"*Risk:* {text(message.risk)}",
        f"*Time left:* {text(message.time_left)}",
        f"*Status:* {text(message.status)}",
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _header(message.title)}},
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
            "text": slack_escape(
                f"{message.title}: {message.tool} in {message.task_title} {message.url}"
            ),
            "blocks": slack_blocks(message),
        }
        post(url, content=json.dumps(body).encode(), headers={})
