"""What one notification says (`review_message`) and the transport of the channel it goes to
(`channel_transport`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from harness_base.config import harness_config
from review.models import ReviewRequest, ReviewStatus
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

# The decisions a message may carry as a button or a link.
ONE_CLICK = ("approve", "reject")


def review_message(*, review: ReviewRequest, event: str, now: datetime) -> ReviewMessage:
    if review.status == ReviewStatus.PENDING and review.expires_at is not None:
        time_left = duration_text(max(0.0, (review.expires_at - now).total_seconds()))
    elif review.status == ReviewStatus.PENDING:
        time_left = "no limit"
    else:
        time_left = "closed"
    # The preview and the hash come from the same row: what the message shows is the effect
    # of exactly the arguments its buttons and links bind (the edited ones after an edit).
    preview = review.shown_preview or review.target
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
        edit=tuple(
            {name: _bounded(value) for name, value in change.items()}
            for change in review.edit_changes
        ),
        edited_by=review.edited_by.get_username() if review.edited_by else "",
        edited_at=review.edited_at if review.edited_arguments is not None else None,
        decisions=tuple(
            d for d in ONE_CLICK if d in ((review.interrupt or {}).get("allowed") or ONE_CLICK)
        ),
    )


def _bounded(value: Any) -> Any:
    """An edited argument as a message carries it: a long string cut (the page shows all)."""
    if isinstance(value, str) and len(value) > PREVIEW_MAX_CHARS:
        return value[:PREVIEW_MAX_CHARS] + "… (truncated)"
    return value


def channel_transport(*, name: str) -> Transport:
    config = harness_config()
    if name == LEGACY_WEBHOOK and config.review_webhook_url:
        return LegacyWebhook(config.review_webhook_url)
    channel = config.notifications.channels.get(name)
    if channel is None:
        raise NotificationFailed(f"channel {name!r} is no longer in harness.yaml")
    return transport_for(channel)
