"""HTTP header parsing shared by the model adapter and the `http_request` tool."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date; None when absent or
    unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
