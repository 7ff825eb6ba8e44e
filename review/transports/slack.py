"""Slack: a Block Kit message (`slack_blocks`) to an incoming webhook, or by chat.postMessage
to a channel, which chat.update rewrites after an edit (the clicks on its buttons are taken by
review/slack.py)."""

from __future__ import annotations

import json
import os
from typing import Any

from django.conf import settings
from slack_sdk.errors import SlackApiError
from slack_sdk.web import WebClient

from harness_base.config import SlackChannelConfig
from review.transports.base import NotificationFailed, ReviewMessage, Transport, env_value, post

# Slack's limit on a header block's text.
HEADER_MAX = 150


def slack_escape(value: str) -> str:
    """Text as Slack shows it literally: &, < and > are its only control characters (a `<`
    starts a link or a mention, `<!channel>` pings everyone), in every text field, the
    message's fallback `text` included."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escaped_cut(value: str, limit: int) -> str:
    """`value` escaped and cut to `limit` characters as sent, never splitting an entity: Slack
    refuses a whole message whose text is over a block's limit, and escaping can make a text
    up to five times longer (a diff of an HTML file)."""
    cut = value[:limit]
    while len(escaped := slack_escape(cut)) > limit:
        cut = cut[: max(0, len(cut) - max(1, (len(escaped) - limit) // 5))]
    return escaped


# A section's text may hold 3,000 characters; what surrounds the cut text fits in the rest.
SECTION_TEXT_MAX = 2800


SLACK_API_TIMEOUT_S = 10


def slack_blocks(message: ReviewMessage) -> list[dict[str, Any]]:
    """The Block Kit message: the facts, who edited the arguments and the edit (if an approval
    did), the diff or command of exactly the arguments the buttons bind, and (while the review
    is pending) approve / reject buttons whose `value` carries the review id and the
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
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _escaped_cut(message.title, HEADER_MAX)},
        },
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in facts]},
    ]
    if message.reason:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"*Why:* {text(message.reason)}"},
            }
        )
    if message.edited:
        edit = _escaped_cut("\n".join(f"• {line}" for line in message.edit_lines), SECTION_TEXT_MAX)
        blocks.append(
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*Edited by {text(message.edited_by or 'a reviewer')}* (the "
                    f"proposal was changed; below is the edited call's effect):\n{edit}",
                },
            }
        )
    if message.preview:
        blocks.append(
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"```{_escaped_cut(message.preview, SECTION_TEXT_MAX)}```",
                },
            }
        )
    value = json.dumps({"review_id": message.review_id, "arguments_hash": message.arguments_hash})
    buttons: list[dict[str, Any]] = []
    if message.status == "pending":
        buttons += [
            {
                "type": "button",
                "action_id": f"review_{decision}",
                "style": style,
                "text": {"type": "plain_text", "text": decision.capitalize()},
                "value": value,
            }
            for decision, style in (("approve", "primary"), ("reject", "danger"))
            if decision in message.decisions
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

    def _body(self, message: ReviewMessage) -> dict[str, Any]:
        return {
            "text": slack_escape(
                f"{message.title}: {message.tool} in {message.task_title} {message.url}"
            ),
            "blocks": slack_blocks(message),
        }

    def _client(self) -> WebClient:
        token = env_value(self.config.bot_token_env or "", what="the Slack app's bot token")
        return WebClient(
            token=token, base_url=settings.HARNESS_SLACK_API_URL, timeout=SLACK_API_TIMEOUT_S
        )

    def _api(self, method: str, **fields: Any) -> dict[str, Any]:
        try:
            data: dict[str, Any] = getattr(self._client(), method)(**fields).data
            return data
        except SlackApiError as exc:
            error = exc.response.get("error", "error")
            raise NotificationFailed(f"Slack {method}: {error}") from None
        except OSError as exc:
            raise NotificationFailed(f"Slack {method}: {type(exc).__name__}") from None

    def notify(self, *, message: ReviewMessage, delivery_id: str) -> dict[str, str] | None:
        if self.config.channel is not None:
            sent = self._api("chat_postMessage", channel=self.config.channel, **self._body(message))
            return {"channel": str(sent.get("channel") or ""), "ts": str(sent.get("ts") or "")}
        name = self.config.webhook_url_env or ""
        url = env_value(name, what="the Slack incoming webhook URL")
        if not url.startswith(("https://", "http://")):
            raise NotificationFailed(f"environment variable {name} is not an http(s) URL")
        post(url, content=json.dumps(self._body(message)).encode(), headers={})
        return None

    def update(self, *, message: ReviewMessage, posted: dict[str, str]) -> None:
        """chat.update of a message chat.postMessage sent: its buttons now bind what it shows."""
        self._api("chat_update", channel=posted["channel"], ts=posted["ts"], **self._body(message))
