"""The REST API root (`/api/v1`): authentication, error shapes, and the app routers."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, ValidationError

from tasks.errors import NotFound
from tasks.web.api_auth import READ, credentials_problem
from tasks.web.api_query import refuse_unknown_query

api = NinjaAPI(
    title="Agent Harness API",
    version="1",
    urls_namespace="api",
    auth=READ,
    docs_url="/docs",
    openapi_url="/openapi.json",
)
# Every GET operation answers 422 naming a query parameter it does not declare.
api.add_decorator(refuse_unknown_query, mode="operation")


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError):
    """422 with one entry per bad field: {"field": "body.budget.max_steps", "message": ...}."""
    errors = []
    for item in exc.errors:
        # ninja prefixes where a value came from ("body", "query", "path"): the field is the rest.
        loc = [str(p) for p in item.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path"):
            loc = loc[1:]
        # ...then the endpoint's parameter name (`payload`, `body`, or `spec` for the task spec
        # that is the whole body) when a field follows it: `budget.max_steps`, as the spec's
        # own checks (SpecError) and the New task page name it.
        if len(loc) > 1 and loc[0] in ("payload", "body", "spec"):
            loc = loc[1:]
        errors.append({"field": ".".join(loc) or "body", "message": item.get("msg", "invalid")})
    return api.create_response(request, {"detail": "invalid input", "errors": errors}, status=422)


@api.exception_handler(NotFound)
def _not_found(request: HttpRequest, exc: NotFound):
    return api.create_response(request, {"detail": str(exc) or "not found"}, status=404)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError):
    response = api.create_response(
        request,
        {"detail": "authentication required", "reason": credentials_problem(request)},
        status=401,
    )
    response["WWW-Authenticate"] = "Bearer"  # RFC 9110: a 401 names the scheme to use
    return response


from checkpoints.api import router as checkpoints_router  # noqa: E402
from dashboard.task_api import router as tasks_router  # noqa: E402
from review.api import router as review_router  # noqa: E402

api.add_router("/", tasks_router)
api.add_router("/", review_router)

from dashboard.api import router as stats_router  # noqa: E402
from dashboard.ops_api import router as ops_router  # noqa: E402

api.add_router("/", stats_router)
api.add_router("/", ops_router)
api.add_router("/", checkpoints_router)

from checkpoints.files_api import router as files_router  # noqa: E402

api.add_router("/", files_router)

from multiagent.api import router as multiagent_router  # noqa: E402

api.add_router("/", multiagent_router)

from cases.api import router as cases_router  # noqa: E402

api.add_router("/", cases_router)

from dashboard.template_api import router as templates_router  # noqa: E402

api.add_router("/", templates_router)
