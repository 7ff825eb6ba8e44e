"""The request type of the views and API operations behind a login or a credential:
`login_required`, the role decorators of `tasks.web.access` and the API's `role_auth` all let a
request through only with a real account on it, so its `user` is a `User`, never the
`AnonymousUser` that a plain `HttpRequest` may carry. Only a type: nothing checks it at run
time beyond what those gates already do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class AuthedRequest(HttpRequest):
    user: User
