"""RQ jobs of the review app. Thin: take primitive ids, call one service."""

from __future__ import annotations

from review.notifications import notification_send as _send


def notification_send(notification_id: int) -> str:
    return _send(notification_id=notification_id)
