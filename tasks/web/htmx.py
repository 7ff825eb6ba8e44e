"""HTMX request helpers shared by the server-rendered views."""

from __future__ import annotations

from django.http import HttpRequest


def is_htmx(request: HttpRequest) -> bool:
    """True for requests HTMX makes (they get a fragment, not the whole page)."""
    return request.headers.get("HX-Request") == "true"
