"""Who may call an API operation: credentials (a Bearer token or a logged-in session) and then
a role check, both before the request body is parsed.

- no credentials, or credentials that do not match -> 401 (any method; the body says which);
- a valid user without the operation's role -> 403.

Every operation declares its role with `auth=role_auth(...)` (or inherits the API's default,
read access); the generated permission matrix in tests/security checks each one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security import HttpBearer, SessionAuth

from tasks.models import ApiToken
from tasks.selectors import user_can_create, user_can_operate, user_can_view
from tasks.services import api_token_hash, api_token_used

RoleCheck = Callable[[User], bool]


def _authorize(user: User, check: RoleCheck, need: str) -> User:
    if not check(user):
        raise HttpError(403, f"your account may not {need}")
    return user


class BearerToken(HttpBearer):
    def __init__(self, check: RoleCheck, need: str) -> None:
        super().__init__()
        self.check, self.need = check, need

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        row = (
            ApiToken.objects.select_related("user")
            .filter(token_hash=api_token_hash(token), revoked=False, user__is_active=True)
            .first()
        )
        if row is None:
            return None
        api_token_used(token=row)
        request.user = row.user
        return _authorize(row.user, self.check, self.need)


class Session(SessionAuth):
    """The browser's session. Without a logged-in user this is not a credential at all, so the
    answer is 401, not ninja's CSRF 403; with one, unsafe methods still need the CSRF token."""

    def __init__(self, check: RoleCheck, need: str) -> None:
        super().__init__()
        self.check, self.need = check, need

    def __call__(self, request: HttpRequest) -> Any:
        if not request.user.is_authenticated:
            return None
        return super().__call__(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = request.user
        if not user.is_authenticated:  # __call__ lets only a logged-in session through
            return None
        return _authorize(user, self.check, self.need)


def role_auth(check: RoleCheck, need: str) -> list[Any]:
    """The `auth=` of an operation open to users for whom `check(user)` holds; `need` completes
    "your account may not ..." in the 403."""
    return [BearerToken(check, need), Session(check, need)]


def credentials_problem(request: HttpRequest) -> str:
    """Why a request was not authenticated, for the 401 body."""
    if request.headers.get("Authorization"):
        return "invalid credentials: the Authorization header is not a valid Bearer token"
    return "missing credentials: send Authorization: Bearer <token> or log in"


READ = role_auth(user_can_view, "read tasks and reviews (ask an admin for a role)")
CREATE = role_auth(user_can_create, "create tasks (operators and creators may)")
OPERATE = role_auth(user_can_operate, "do this (operators may)")
