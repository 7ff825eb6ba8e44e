"""What the layout needs from the dashboard on every page: the zone the user chose for times
(`<body data-time-zone>`, read by static/harness.js), the search box's bound and whether the
user may start tasks (the "New task" link)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import lazy

from dashboard.selectors import SEARCH_MAX_LENGTH, user_time_zone
from tasks.selectors import user_can_create


def preferences(request: HttpRequest) -> dict[str, Any]:
    user = request.user
    if not user.is_authenticated:
        return {}
    # Lazy: read only when a template shows it (the layout), not for HTMX fragments.
    zone = lazy(lambda: user_time_zone(user=user), str)()
    return {
        "user_time_zone": zone,
        "search_max_length": SEARCH_MAX_LENGTH,
        # The user's groups are read once per request (tasks.selectors.user_in_group).
        "nav_can_create": user_can_create(user),
    }
