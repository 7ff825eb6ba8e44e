"""Access rules for server-rendered views: everything behind login and a role; actions for
operators.

A logged-in user in no role group gets 403 on every page (`viewer_required`). Viewers see
every page but never an action: templates hide the buttons (`can_operate`) and a POST from a
viewer gets 403 here (`operator_required`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden

from tasks.selectors import user_can_operate, user_can_view


def operator_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not user_can_operate(request.user):
            return HttpResponseForbidden("only operators may do this")
        return view(request, *args, **kwargs)

    return wrapper


def viewer_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not user_can_view(request.user):
            return HttpResponseForbidden("your account has no role here: ask an admin for one")
        return view(request, *args, **kwargs)

    return wrapper
