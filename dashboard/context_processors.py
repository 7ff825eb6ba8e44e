"""What the layout needs from the dashboard on every page: the zone the user chose for times
(`<body data-time-zone>`, read by static/harness.js) and the search box's bound."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import lazy

from dashboard.selectors import SEARCH_MAX_LENGTH, user_time_zone


def preferences(request: HttpRequest) -> dict:
    if not request.user.is_authenticated:
        return {}
    # Lazy: read only when a template shows it (the layout), not for HTMX fragments.
    zone = lazy(lambda: user_time_zone(user=request.user), str)()
    return {"user_time_zone": zone, "search_max_length": SEARCH_MAX_LENGTH}
