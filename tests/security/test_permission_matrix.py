"""The permission matrix, generated: every URL pattern and every OpenAPI operation has a
decision below, and every role is tried against every one of them.

A new page or API operation without a decision fails `test_every_*_has_a_decision`; a decision
that no longer matches anything fails too, so the table cannot rot."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from harness_site.api import api
from tests.conftest import ApiClient, page_client
from tests.factories import UserFactory

from .conftest import ROLES

pytestmark = pytest.mark.django_db

# Who may do what: a level names the least role that may.
ALLOWED = {
    "public": set(ROLES),
    "read": {"viewer", "creator", "operator", "superuser"},
    "create": {"creator", "operator", "superuser"},
    "operate": {"operator", "superuser"},
    "staff": {"superuser"},
    # Superusers, and operators with the admin flag (tests/security/test_people_escalation.py:
    # the cast's operator has no admin flag).
    "people": {"superuser"},
    # No session role: the request's own signature decides (Slack's interactivity requests).
    "signed": set(),
    # No session role: HARNESS_METRICS_TOKEN / HARNESS_METRICS_ALLOW decide (tests/security/
    # test_metrics_access.py); a session alone never scrapes.
    "token": set(),
}

# route (as Django prints it) -> (method, level). Third-party sections decided by prefix.
PAGES: dict[str, tuple[str, str]] = {
    "": ("GET", "read"),
    "tasks/": ("GET", "read"),
    "tasks/bulk/": ("POST", "operate"),
    # Starting a task from the browser, and saving a task's spec as one's template.
    "tasks/new/": ("GET", "create"),
    "tasks/<uuid:task_id>/save-template/": ("POST", "create"),
    "tasks/<uuid:task_id>/": ("GET", "read"),
    "tasks/<uuid:task_id>/live/": ("GET", "read"),
    "tasks/<uuid:task_id>/live-output/": ("GET", "read"),
    "tasks/<uuid:task_id>/outputs/<int:output_id>/": ("GET", "read"),
    "tasks/<uuid:task_id>/events.json": ("GET", "read"),
    "tasks/<uuid:task_id>/cancel/": ("POST", "operate"),
    "tasks/<uuid:task_id>/priority/": ("POST", "operate"),
    "tasks/<uuid:task_id>/checkpoints/<uuid:checkpoint_id>/rollback/": ("GET", "operate"),
    "tasks/<uuid:task_id>/checkpoints/<uuid:checkpoint_id>/fork/": ("GET", "operate"),
    "tasks/<uuid:task_id>/adopt/": ("POST", "operate"),
    "tasks/<uuid:task_id>/checkpoints/diff/": ("GET", "read"),
    "tasks/<uuid:task_id>/graph-checkpoints/<uuid:checkpoint_id>/rollback/": ("GET", "operate"),
    "tasks/<uuid:task_id>/recover/": ("POST", "operate"),
    "tasks/<uuid:task_id>/files/view/": ("GET", "read"),
    "tasks/<uuid:task_id>/files/download/": ("GET", "read"),
    "tasks/<uuid:task_id>/files/archive/": ("GET", "read"),
    "tasks/<uuid:task_id>/files/diff/": ("GET", "read"),
    "tasks/<uuid:task_id>/group/": ("GET", "read"),
    "tasks/<uuid:task_id>/group-rollback/": ("GET", "operate"),
    "tasks/<uuid:task_id>/save-case/": ("POST", "operate"),
    "tasks/<uuid:task_id>/compare/": ("GET", "read"),
    "cases/": ("GET", "read"),
    "cases/runs/<uuid:run_id>/": ("GET", "read"),
    "cases/<uuid:case_id>/": ("GET", "read"),
    "cases/<uuid:case_id>/replay/": ("POST", "operate"),
    "reviews/": ("GET", "read"),
    "reviews/pending-count/": ("GET", "read"),
    "reviews/<int:review_id>/": ("GET", "read"),
    "reviews/<int:review_id>/decide/": ("POST", "operate"),
    "reviews/<int:review_id>/plan-decide/": ("POST", "operate"),
    "reviews/<int:review_id>/edit-preview/": ("POST", "operate"),
    # The confirmation page of an email's decision link (its POST needs the recipient).
    "reviews/<int:review_id>/email/<str:token>/": ("GET", "read"),
    "reviews/<int:review_id>/claim/": ("POST", "operate"),
    "reviews/<int:review_id>/unclaim/": ("POST", "operate"),
    "reviews/<int:review_id>/assign/": ("POST", "operate"),
    "reviews/<int:review_id>/comment/": ("POST", "operate"),
    "reviews/bulk/": ("POST", "operate"),
    "reviews/rules/": ("GET", "read"),
    "reviews/rules/<int:rule_id>/": ("GET", "read"),
    "reviews/rules/<int:rule_id>/resume/": ("POST", "operate"),
    "reviews/rules/<int:rule_id>/pause/": ("POST", "operate"),
    "reviews/rules/<int:rule_id>/revoke/": ("POST", "operate"),
    "stats/failures/": ("GET", "read"),
    "stats/failures/<slug:table>.csv": ("GET", "read"),
    "stats/reviews/": ("GET", "read"),
    "stats/reviews/<slug:table>.csv": ("GET", "read"),
    "ops/": ("GET", "read"),
    "ops/jobs/<slug:queue_name>/<str:job_id>/requeue/": ("POST", "operate"),
    "audit/": ("GET", "read"),
    "search/": ("GET", "read"),
    # A user's own settings (their time zone): every role, for themselves only.
    "preferences/": ("GET", "read"),
    # People and roles (issue #45): invite, change a role, deactivate.
    "people/": ("GET", "people"),
    "people/invite/": ("POST", "people"),
    "people/<int:user_id>/role/": ("POST", "people"),
    "people/<int:user_id>/deactivate/": ("POST", "people"),
    "integrations/slack/actions/": ("POST", "signed"),
    "metrics": ("GET", "token"),
    # The schema and its viewer describe the API, they hold no data.
    "api/v1/": ("GET", "public"),
    "api/v1/openapi.json": ("GET", "public"),
    "api/v1/docs": ("GET", "public"),
    "favicon.ico": ("GET", "public"),
    # Probes for load balancers (harness_site/health.py; tests/security/test_health_endpoints.py).
    "healthz": ("GET", "public"),
    "readyz": ("GET", "public"),
}
PREFIXES: dict[str, tuple[str, str, str]] = {
    # prefix -> (sample path, method, level)
    "admin/": ("/admin/", "GET", "staff"),
    "django-rq/": ("/django-rq/", "GET", "staff"),
    "accounts/": ("/accounts/login/", "GET", "public"),
}

# "METHOD /api/v1/path" -> level
OPERATIONS: dict[str, str] = {
    "POST /api/v1/tasks": "create",
    "GET /api/v1/tasks": "read",
    "GET /api/v1/tasks/{task_id}": "read",
    "GET /api/v1/tasks/{task_id}/checkpoints": "read",
    "GET /api/v1/tasks/{task_id}/events": "read",
    "GET /api/v1/tasks/{task_id}/tool-calls": "read",
    "GET /api/v1/tasks/{task_id}/plan": "read",
    "GET /api/v1/tasks/{task_id}/outputs/{output_id}": "read",
    "POST /api/v1/tasks/{task_id}/cancel": "operate",
    "POST /api/v1/tasks/{task_id}/priority": "operate",
    "GET /api/v1/reviews": "read",
    "GET /api/v1/reviews/{review_id}": "read",
    "POST /api/v1/reviews/{review_id}/decision": "operate",
    "POST /api/v1/reviews/bulk-decision": "operate",
    "POST /api/v1/reviews/{review_id}/claim": "operate",
    "POST /api/v1/reviews/{review_id}/unclaim": "operate",
    "POST /api/v1/reviews/{review_id}/assign": "operate",
    "POST /api/v1/reviews/{review_id}/comments": "operate",
    "GET /api/v1/standing-rules": "read",
    "GET /api/v1/standing-rules/{rule_id}": "read",
    "POST /api/v1/standing-rules/{rule_id}/resume": "operate",
    "POST /api/v1/standing-rules/{rule_id}/pause": "operate",
    "POST /api/v1/standing-rules/{rule_id}/revoke": "operate",
    "GET /api/v1/reviews/{review_id}/receipt": "read",
    "GET /api/v1/receipts": "read",
    "GET /api/v1/stats/failures": "read",
    "GET /api/v1/ops/workers": "read",
    "POST /api/v1/ops/jobs/{queue_name}/{job_id}/requeue": "operate",
    "GET /api/v1/stats/reviews": "read",
    "GET /api/v1/tasks/{task_id}/rollback/preview": "read",
    "POST /api/v1/tasks/{task_id}/rollback": "operate",
    "POST /api/v1/tasks/{task_id}/retry": "operate",
    "POST /api/v1/tasks/{task_id}/recover": "operate",
    "POST /api/v1/tasks/{task_id}/resume": "operate",
    "POST /api/v1/tasks/{task_id}/compensation": "operate",
    "GET /api/v1/tasks/{task_id}/recovery-plan": "read",
    "GET /api/v1/tasks/{task_id}/checkpoints/diff": "read",
    "GET /api/v1/tasks/{task_id}/files": "read",
    "GET /api/v1/tasks/{task_id}/files/content": "read",
    "GET /api/v1/tasks/{task_id}/files/raw": "read",
    "GET /api/v1/tasks/{task_id}/graph-checkpoints": "read",
    "GET /api/v1/tasks/{task_id}/graph-rollback/preview": "read",
    "GET /api/v1/tasks/{task_id}/group": "read",
    "GET /api/v1/tasks/{task_id}/global-checkpoints": "read",
    "POST /api/v1/tasks/{task_id}/global-checkpoints": "operate",
    "GET /api/v1/tasks/{task_id}/global-checkpoints/rounds/{round_id}": "read",
    "GET /api/v1/tasks/{task_id}/group-rollback/preview": "read",
    "POST /api/v1/tasks/{task_id}/group-rollback": "operate",
    # Saved cases and replays (issue #31): saving and replaying are operators'.
    "POST /api/v1/tasks/{task_id}/save-case": "operate",
    "POST /api/v1/tasks/{task_id}/fork": "operate",
    "POST /api/v1/tasks/{task_id}/adopt": "operate",
    "GET /api/v1/tasks/{task_id}/compare": "read",
    "GET /api/v1/cases": "read",
    "GET /api/v1/cases/{case_id}": "read",
    "POST /api/v1/cases/{case_id}/replay": "operate",
    "GET /api/v1/cases/runs/{run_id}": "read",
    # Saved task templates (issue #45 item 3): for those who create tasks, each their own
    # (tests/security/test_template_access.py).
    "GET /api/v1/templates": "create",
    "POST /api/v1/templates": "create",
    "GET /api/v1/templates/{template_id}": "create",
    "POST /api/v1/templates/{template_id}/start": "create",
}


def url_routes() -> list[tuple[str, Any]]:
    """(route, callback) of every URL pattern, nested includes flattened."""

    def walk(patterns, prefix: str):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern), p.callback

    return list(walk(get_resolver().url_patterns, ""))


def page_routes() -> list[str]:
    """Pages: every route except the API operations (decided from the schema below)."""
    return [
        route
        for route, callback in url_routes()
        if callback.__module__ != "ninja.operation"
        and not any(route.startswith(prefix) for prefix in PREFIXES)
    ]


def schema_operations() -> list[str]:
    schema = api.get_openapi_schema()
    paths = schema["paths"]
    return [f"{method.upper()} {path}" for path, methods in paths.items() for method in methods]


def test_every_page_has_a_decision():
    routes = page_routes()
    assert sorted(set(routes) - set(PAGES)) == [], "pages without an access decision"
    assert sorted(set(PAGES) - set(routes)) == [], "decisions for pages that no longer exist"


def test_every_api_operation_has_a_decision():
    operations = schema_operations()
    assert sorted(set(operations) - set(OPERATIONS)) == [], "operations without a decision"
    assert sorted(set(OPERATIONS) - set(operations)) == [], "decisions for vanished operations"


def _fill(template: str, ids: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name = match.group("name")
        return ids.get(name, "x")

    filled = re.sub(r"<(?:\w+:)?(?P<name>\w+)>", value, template)
    return "/" + re.sub(r"\{(?P<name>\w+)\}", value, filled).lstrip("/")


@pytest.fixture
def ids(waiting_task) -> dict[str, str]:
    task, review = waiting_task
    return {
        "task_id": str(task.id),
        "review_id": str(review.id),
        "rule_id": "999999",
        "checkpoint_id": str(uuid.uuid4()),
        "table": "by_tool",
        "queue_name": "default",
        "job_id": "nojob",
        "output_id": "999999",
        "case_id": str(uuid.uuid4()),
        "run_id": str(uuid.uuid4()),
        "user_id": str(UserFactory(username="matrix-target").pk),
        "template_id": str(uuid.uuid4()),
    }


def _page_cases() -> list[tuple[str, str, str]]:
    cases = [(route, method, level) for route, (method, level) in PAGES.items()]
    cases += [(sample, method, level) for sample, method, level in PREFIXES.values()]
    return cases


def denied_responses(cast, client_for, method: str, url: str, level: str):
    """Send an empty POST or a GET of `url` as every role (`client_for(user)`). No role gets a
    server error and every role `level` allows gets through (no 401 or 403, no login page);
    yields (role, response, where) for each role it does not allow."""
    for role in ROLES:
        client = client_for(cast[role])
        response = client.post(url, {}) if method == "POST" else client.get(url)
        body = b"(streamed)" if response.streaming else response.content[:200]
        where = f"{role} {method} {url} -> {response.status_code} {body!r}"
        assert response.status_code < 500, where
        if role in ALLOWED[level]:
            assert response.status_code not in (401, 403), where
            assert not _is_login_redirect(response), where
        else:
            yield role, response, where


def _is_login_redirect(response) -> bool:
    return response.status_code == 302 and "login" in response.get("Location", "")


@pytest.mark.parametrize("route, method, level", _page_cases(), ids=lambda v: str(v))
def test_page_access_by_role(cast, ids, route, method, level):
    url = _fill(route, ids)
    for role, response, where in denied_responses(cast, page_client, method, url, level):
        if level == "signed":
            assert response.status_code == 401, where
        elif level == "token":
            assert response.status_code in (401, 403), where
        elif role == "anonymous" or level == "staff":
            assert _is_login_redirect(response) or response.status_code == 403, where
        else:
            assert response.status_code == 403, where


@pytest.mark.parametrize("operation, level", list(OPERATIONS.items()))
def test_api_access_by_role(cast, ids, operation, level):
    method, template = operation.split(" ", 1)
    url = _fill(template, ids)
    for role, response, where in denied_responses(cast, ApiClient, method, url, level):
        if role == "anonymous":
            assert response.status_code == 401, where
            assert "missing credentials" in response.json()["reason"], where
        else:
            assert response.status_code == 403, where
