"""Access rules for server-rendered views: everything behind login and a role; actions for
operators.

A logged-in user in no role group gets 403 on every page (`viewer_required`), shown inside the
layout (navigation, log-out) and without any of the data. Viewers see every page but never an
action: templates hide the buttons (`can_operate`) and a POST from a viewer gets 403 here
(`operator_required`); starting tasks is for operators and creators (`creator_required`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render

from harness_base.http import AuthedRequest
from tasks.selectors import user_can_create, user_can_operate, user_can_view


def forbidden(request: AuthedRequest, message: str) -> HttpResponse:
    """A 403 page in the layout, saying why."""
    return render(request, "403.html", {"message": message}, status=403)


def operator_required(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    @login_required
    @wraps(view)
    def wrapper(request: AuthedRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not user_can_operate(request.user):
            return forbidden(request, "only operators may do this")
        return view(request, *args, **kwargs)

    return wrapper


def creator_required(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Pages that start tasks (New task, templates): operators and creators."""

    @login_required
    @wraps(view)
    def wrapper(request: AuthedRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not user_can_create(request.user):
            return forbidden(request, "only operators and creators may start tasks")
        return view(request, *args, **kwargs)

    return wrapper


def viewer_required(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    @login_required
    @wraps(view)
    def wrapper(request: AuthedRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not user_can_view(request.user):
            return forbidden(request, "your account has no role here: ask an admin for one")
        return view(request, *args, **kwargs)

    return wrapper
