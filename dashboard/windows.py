"""The time window and bucket that the overview, the statistics page and the statistics API
share: `since` is a duration back from now (`24h`, `7d`, `90m`) or an ISO datetime."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from harness_base.config import parse_duration

Bucket = Literal["hour", "day"]
WINDOW_CHOICES = ("1h", "24h", "7d", "30d")
MAX_HOUR_BUCKETS = 24 * 31
MAX_SPAN = timedelta(days=400)


class WindowError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Window:
    since: datetime
    until: datetime
    bucket: Bucket
    label: str

    def query(self) -> str:
        return f"since={self.label}&bucket={self.bucket}"


def window_parse(
    *, since: str | None, bucket: str | None, now: datetime, default: str = "24h"
) -> Window:
    """Raises WindowError naming the bad parameter."""
    label = (since or default).strip()
    try:
        seconds = parse_duration(label)
    except ValueError:
        try:
            start = datetime.fromisoformat(label)
        except ValueError:
            raise WindowError(
                "since", f"not a duration (24h, 7d) or ISO datetime: {label[:40]!r}"
            ) from None
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
    else:
        # Checked before the subtraction: 999999999d or 1e30h overflow a datetime.
        if not math.isfinite(seconds) or seconds > MAX_SPAN.total_seconds():
            raise WindowError("since", f"the window may span at most {MAX_SPAN.days} days")
        start = now - timedelta(seconds=seconds)
    if start >= now:
        raise WindowError("since", "since must lie in the past")
    if now - start > MAX_SPAN:
        raise WindowError("since", f"the window may span at most {MAX_SPAN.days} days")
    if bucket not in (None, "", "hour", "day"):
        raise WindowError("bucket", f"bucket must be hour or day, not {bucket!r}")
    chosen: Bucket = "hour" if now - start <= timedelta(hours=48) else "day"
    if bucket == "hour":
        chosen = "hour"
    elif bucket == "day":
        chosen = "day"
    if chosen == "hour" and now - start > timedelta(hours=MAX_HOUR_BUCKETS):
        raise WindowError("bucket", "hourly buckets cover at most 31 days; use bucket=day")
    return Window(since=start, until=now, bucket=chosen, label=label)
