"""Pages: a selector's `NotFound` is a 404, rendered like any other."""

from __future__ import annotations

from collections.abc import Callable

from django.core.handlers.exception import response_for_exception
from django.http import Http404, HttpRequest, HttpResponse

from tasks.errors import NotFound


class NotFoundMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, NotFound):
            return response_for_exception(request, Http404(str(exc)))
        return None
