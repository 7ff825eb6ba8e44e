"""The REST API root (`/api/v1`): authentication, error shapes, and the app routers."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils import timezone
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, ValidationError
from ninja.security import HttpBearer, SessionAuth

from tasks.models import ApiToken
from tasks.services import api_token_hash


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        row = (
            ApiToken.objects.select_related("user")
            .filter(token_hash=api_token_hash(token), revoked=False, user__is_active=True)
            .first()
        )
        if row is None:
            return None
        now = timezone.now()
        if row.last_used_at is None or (now - row.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        request.user = row.user
        return row.user


api = NinjaAPI(
    title="Agent Harness API",
    version="1",
    urls_namespace="api",
    auth=[BearerToken(), SessionAuth()],
    docs_url="/docs",
    openapi_url="/openapi.json",
)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError):
    """422 with one entry per bad field: {"field": "body.budget.max_steps", "message": ...}."""
    errors = []
    for item in exc.errors:
        loc = [str(p) for p in item.get("loc", ()) if p not in ("body", "payload")]
        errors.append({"field": ".".join(loc) or "body", "message": item.get("msg", "invalid")})
    return api.create_response(request, {"detail": "invalid input", "errors": errors}, status=422)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError):
    return api.create_response(request, {"detail": "authentication required"}, status=401)


from checkpoints.api import router as checkpoints_router  # noqa: E402
from review.api import router as review_router  # noqa: E402
from tasks.api import router as tasks_router  # noqa: E402

api.add_router("/", tasks_router)
api.add_router("/", review_router)

from dashboard.api import router as stats_router  # noqa: E402

api.add_router("/", stats_router)
api.add_router("/", checkpoints_router)
