"""The window controls the dashboard views share."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest
from django.utils import timezone

from dashboard.windows import Window, WindowError, window_parse


def request_window(request: HttpRequest, *, default: str) -> Window:
    """The window from ?since=&bucket=; a bad value falls back to the default with a message
    (the API answers 422 instead)."""
    now = timezone.now()
    try:
        return window_parse(
            since=request.GET.get("since"),
            bucket=request.GET.get("bucket"),
            now=now,
            default=default,
        )
    except WindowError as exc:
        messages.error(request, f"{exc.field}: {exc.message}")
        return window_parse(since=None, bucket=None, now=now, default=default)
