"""What every transport shares: the message (ReviewMessage), the error (NotificationFailed),
the base class (Transport), reading a secret from the environment and a bounded POST."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from review.models import edit_lines

HTTP_TIMEOUT = httpx.Timeout(10.0, connect=3.0)
# How much of a diff or a command a message carries.
PREVIEW_MAX_CHARS = 2000
# The channel name of harness.yaml's deprecated `review_webhook_url`.
LEGACY_WEBHOOK = "review_webhook_url"

EVENT_TITLES = {
    "review.requested": "Review requested",
    "review.reminder": "Reminder: review still waiting",
    "review.escalated": "Escalated: nobody has decided this review",
    "review.edited": "Edited: the call to approve changed",
    "review.decided": "Review decided",
    "review.expired": "Review expired",
}


class NotificationFailed(Exception):
    """A send that did not go through; the message is what the Notification row records."""


@dataclass(frozen=True, kw_only=True)
class ReviewMessage:
    """The facts a notification carries (review.notifications.review_message builds it).
    `preview` is the effect of exactly the arguments whose hash `arguments_hash` is (what its
    buttons and links bind); after an approval edited them, `edit` holds the edit argument by
    argument ({"argument", "proposed", "edited"}) and `edited_by` / `edited_at` who and when."""

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
    edit: tuple[dict[str, Any], ...] = ()
    edited_by: str = ""
    edited_at: datetime | None = None
    # The one-click decisions (buttons, mail links) the review accepts: no approve for a
    # review that only a result answers (an external call, a graph interrupt that takes a
    # value); the review page offers respond.
    decisions: tuple[str, ...] = ("approve", "reject")

    @property
    def rule(self) -> str:
        return ", ".join(self.rules)

    @property
    def title(self) -> str:
        return EVENT_TITLES.get(self.event, self.event)

    @property
    def edited(self) -> bool:
        return self.edited_at is not None or bool(self.edit)

    @property
    def edit_lines(self) -> list[str]:
        """The edit as text, one "argument: proposed → edited" per changed argument."""
        return edit_lines(self.edit)

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
            # The effect of the arguments `arguments_hash` names (the edited ones after an
            # edit), and the edit itself, with who made it; null when nobody edited.
            "preview": self.preview,
            "edited": {
                "by": self.edited_by,
                "at": self.edited_at.isoformat() if self.edited_at else None,
                "changes": list(self.edit),
            }
            if self.edited
            else None,
            "requested_at": self.requested_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "url": self.url,
        }


def env_value(name: str, *, what: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise NotificationFailed(f"environment variable {name} ({what}) is not set")
    return value


def post(url: str, *, content: bytes, headers: dict[str, str]) -> None:
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
    def notify(self, *, message: ReviewMessage, delivery_id: str) -> dict[str, str] | None:
        """Send `message`; `delivery_id` is the same on every retry of one notification.
        Returns where a message that can be updated later went (Slack's chat.postMessage:
        {"channel", "ts"}), else None."""

    def update(self, *, message: ReviewMessage, posted: dict[str, str]) -> None:
        """Rewrite a message `notify` sent (`posted` is what it returned) to say `message`."""
        raise NotificationFailed(f"a {self.kind} message cannot be updated")

    def missing_env(self) -> list[str]:
        """The environment variables this channel needs that this process does not have."""
        return []
