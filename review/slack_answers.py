"""The answer to a Slack click, posted to the request's `response_url` (review/slack.py takes
the click): only to Slack's own host (hooks.slack.com, or the host of HARNESS_SLACK_API_URL),
since the URL comes inside the request and the harness posts to no other host on a request's
say. A stale button's message (its hash is no longer the review's: an approval edited the
arguments) is first replaced by the review's message as it is now."""

from __future__ import annotations

import logging
from typing import Any

import httpx
from django.conf import settings
from django.utils import timezone

from review.models import NotificationEvent, ReviewRequest
from review.notifications import review_message
from review.transports.slack import slack_blocks, slack_escape

log = logging.getLogger("review.slack")

SLACK_TIMEOUT_S = 5
# Where Slack's response_urls point (besides the host of HARNESS_SLACK_API_URL).
SLACK_RESPONSE_HOST = "https://hooks.slack.com/"


def _origin(url: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of an absolute URL without user info, as httpx would send to it."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    if parsed.scheme not in ("https", "http") or not parsed.host or parsed.userinfo:
        return None
    return parsed.scheme, parsed.host, parsed.port


def response_url_allowed(url: str) -> bool:
    """Whether `url` is on Slack's own host: hooks.slack.com over HTTPS, or the host of
    HARNESS_SLACK_API_URL (Slack's Web API; a stand-in under test)."""
    origin = _origin(url)
    return origin is not None and origin in {
        _origin(SLACK_RESPONSE_HOST),
        _origin(settings.HARNESS_SLACK_API_URL),
    }


def slack_respond(*, response_url: str, text: str, replace_with: int | None = None) -> None:
    """The ephemeral answer to the clicker; with `replace_with` (a review id), first the
    clicked message is replaced by the review's message as it is now (a stale button's
    message: its preview and buttons become the edited call's). Failing to send changes
    nothing decided."""
    if not response_url_allowed(response_url):
        log.warning("slack response_url not on Slack's host: not posted")
        return
    bodies: list[dict[str, Any]] = []
    if replace_with is not None:
        review = ReviewRequest.objects.select_related("task", "edited_by").get(id=replace_with)
        message = review_message(review=review, event=NotificationEvent.EDITED, now=timezone.now())
        bodies.append(
            {
                "replace_original": True,
                "text": slack_escape(message.title),
                "blocks": slack_blocks(message),
            }
        )
    bodies.append({"response_type": "ephemeral", "replace_original": False, "text": text})
    for body in bodies:
        try:
            httpx.post(response_url, json=body, timeout=SLACK_TIMEOUT_S, follow_redirects=False)
        except httpx.HTTPError as exc:
            log.warning("slack response_url post failed: %s", type(exc).__name__)
