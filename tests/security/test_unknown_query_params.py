"""A query parameter an API list does not know is refused (422 naming it), never ignored: an
ignored `?task=` returned every review and an operator approved another task's. Every GET
operation of the schema is attacked, so an endpoint added later is covered without a line here.
The reviews list takes the inbox's filter names (`task` beside `task_id`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from harness_site.api import api
from tests.factories import ReviewRequestFactory, TaskFactory, ToolCallFactory, scripted_spec

pytestmark = pytest.mark.django_db

UNKNOWN = {"field": "tsk", "message": "unknown query parameter"}


def _value(schema: dict[str, Any]) -> str:
    """A valid value of a required parameter (the check runs after they are validated)."""
    if schema.get("format") == "uuid":
        return str(uuid.UUID(int=1))  # fixed: xdist processes must collect the same ids
    if schema.get("type") == "integer":
        return str(max(1, schema.get("minimum", 1)))
    return "a.txt"


def get_operations() -> list[tuple[str, str, dict[str, str]]]:
    """(schema path, URL path, required query values) of every GET operation in the schema."""
    found = []
    for path, item in sorted(api.get_openapi_schema()["paths"].items()):
        if "get" not in item:
            continue
        params = item["get"].get("parameters", [])
        in_path = {p["name"]: _value(p["schema"]) for p in params if p["in"] == "path"}
        required = {
            p["name"]: _value(p["schema"])
            for p in params
            if p["in"] == "query" and p.get("required")
        }
        found.append((path, path.format(**in_path), required))
    return found


def test_the_schema_has_the_list_endpoints_this_test_is_about():
    paths = {path for path, _, _ in get_operations()}
    assert {"/api/v1/reviews", "/api/v1/tasks", "/api/v1/standing-rules", "/api/v1/cases"} <= paths


@pytest.mark.parametrize(
    ("path", "url", "required"), get_operations(), ids=[op[0] for op in get_operations()]
)
def test_an_unknown_query_parameter_is_a_422_naming_it(path, url, required, api_client, operator):
    response = api_client(operator).get(url, {**required, "tsk": "1"})
    assert response.status_code == 422, (path, response.status_code, response.content[:300])
    assert UNKNOWN in response.json()["errors"]


def test_known_parameters_still_work(api_client, operator):
    client = api_client(operator)
    assert (
        client.get("/api/v1/tasks", {"page": 1, "page_size": 5, "status": "running"}).status_code
        == 200
    )
    assert (
        client.get("/api/v1/reviews", {"sort": "risk", "limit": 5, "status": "all"}).status_code
        == 200
    )
    assert client.get("/api/v1/standing-rules", {"limit": 5}).status_code == 200


def test_credentials_are_checked_before_parameters(api_client):
    assert api_client(None).get("/api/v1/reviews", {"tsk": "1"}).status_code == 401


def _review(title: str):
    task = TaskFactory(title=title, spec=scripted_spec([], ["write_file"]), status="waiting_review")
    call = ToolCallFactory(
        task=task,
        call_id="0.0.0",
        tool="write_file",
        arguments={"path": "service.conf", "content": title},
        risk="write",
        status="awaiting_review",
    )
    return ReviewRequestFactory(tool_call=call)


def test_the_task_filter_returns_only_that_tasks_reviews(api_client, operator):
    mine, other = _review("mine"), _review("someone else's")
    client = api_client(operator)
    for name in ("task", "task_id"):
        listed = client.get("/api/v1/reviews", {name: str(mine.task_id)}).json()
        assert [r["id"] for r in listed] == [mine.id], name
    assert [r["id"] for r in client.get("/api/v1/reviews").json()] == [mine.id, other.id]
    clash = client.get(
        "/api/v1/reviews", {"task": str(mine.task_id), "task_id": str(other.task_id)}
    )
    assert clash.status_code == 422 and clash.json()["errors"][0]["field"] == "task_id"


def test_the_inbox_says_it_ignored_an_unknown_filter(as_user, operator):
    page = as_user(operator).get("/reviews/", {"tsk": "x"})
    assert page.status_code == 200
    assert "Ignored tsk: not a filter of the inbox." in page.content.decode()
