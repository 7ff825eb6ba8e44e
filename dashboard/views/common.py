"""What the dashboard views share: the window controls and sortable column headers."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, QueryDict
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


# A sortable column: its sorts in click order, each (the `sort=` value, its aria-sort).
SortCycle = tuple[tuple[str, str], ...]


def sort_headers(
    query: QueryDict, *, current: str, columns: dict[str, SortCycle]
) -> dict[str, dict[str, str]]:
    """Each column's header link (this list's filters kept, back to page 1, the column's next
    sort) and its aria-sort state ("none" unless the list is sorted by it)."""
    headers = {}
    for column, cycle in columns.items():
        values = [value for value, _ in cycle]
        if current in values:
            at = values.index(current)
            state, target = cycle[at][1], values[(at + 1) % len(values)]
        else:
            state, target = "none", values[0]
        params = query.copy()
        params.pop("page", None)
        params["sort"] = target
        headers[column] = {"href": f"?{params.urlencode()}", "state": state}
    return headers
