"""Input that used to answer 5xx (or crash a worker) answers 4xx naming the field, and what
cannot be refused at the door (a command's output, a model's token count) is stored safely."""

from __future__ import annotations

import json

import pytest

from tasks.models import Task
from tests.conftest import page_client

pytestmark = pytest.mark.django_db

SPEC = {"title": "t", "goal": "g", "model": {"kind": "scripted", "script": [{"final": "x"}]}}


def post_raw(client, path: str, raw: str):
    return client.client.post(path, raw, content_type="application/json")


def fields(response) -> list[str]:
    return [e["field"] for e in response.json()["errors"]]


def test_a_huge_page_number_is_422(api_client, viewer):
    response = api_client(viewer).get("/api/v1/tasks", {"page": "9223372036854775807"})
    assert response.status_code == 422
    assert "page" in fields(response)


@pytest.mark.parametrize("action", ["cancel", "retry", "recover", "resume", "rollback"])
def test_deeply_nested_json_is_400_on_every_action(api_client, operator, action):
    task = api_client(operator).post("/api/v1/tasks", SPEC).json()
    deep = "[" * 10_000 + "]" * 10_000
    response = post_raw(api_client(operator), f"/api/v1/tasks/{task['id']}/{action}", deep)
    assert response.status_code == 400
    assert "nested deeper" in response.json()["detail"]


def test_deeply_nested_args_in_a_spec_are_400(api_client, operator):
    args = {"path": "a.txt", "content": "x"}
    for _ in range(900):
        args = {"nested": args}
    spec = {**SPEC, "model": {"kind": "scripted", "script": [{"call": "x", "args": args}]}}
    response = api_client(operator).post("/api/v1/tasks", spec)
    assert response.status_code == 400
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    "where, field",
    [
        ('"budget": {"session_timeout_s": Infinity}', "budget.session_timeout_s"),
        ('"budget": {"turn_timeout_s": NaN}', "budget.turn_timeout_s"),
        ('"retry": {"max_s": -Infinity}', "retry.max_s"),
    ],
)
def test_non_finite_numbers_are_422_naming_the_field(api_client, operator, where, field):
    raw = json.dumps(SPEC)[:-1] + ", " + where + "}"
    response = post_raw(api_client(operator), "/api/v1/tasks", raw)
    assert response.status_code == 422, response.content
    assert field in fields(response)
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    "spec, field",
    [
        ({**SPEC, "title": "a\x00b"}, "title"),
        ({**SPEC, "goal": "\x00"}, "goal"),
        (
            {
                **SPEC,
                "model": {
                    "kind": "scripted",
                    "script": [{"call": "write_file", "args": {"path": "a\x00", "content": ""}}],
                },
            },
            "model.script.0.args.path",
        ),
    ],
)
def test_nul_characters_are_422_naming_the_field(api_client, operator, spec, field):
    response = api_client(operator).post("/api/v1/tasks", spec)
    assert response.status_code == 422
    assert field in fields(response)
    assert not Task.objects.exists()


def test_a_nul_in_a_query_parameter_is_422(api_client, viewer, client):
    response = api_client(viewer).get("/api/v1/tasks", {"q": "a\x00b"})
    assert response.status_code == 422 and fields(response) == ["q"]
    page = page_client(viewer)
    assert page.get("/tasks/", {"q": "a\x00b"}).status_code == 422


@pytest.mark.parametrize("since", ["999999999d", "1e30h", "99999999999999999999999s"])
def test_absurd_statistics_windows_are_422(api_client, viewer, since):
    response = api_client(viewer).get("/api/v1/stats/failures", {"since": since})
    assert response.status_code == 422
    assert fields(response) == ["since"]


def test_an_absurd_scripted_token_count_is_refused_at_creation(api_client, operator):
    spec = {**SPEC, "model": {"kind": "scripted", "script": [{"final": "x", "tokens": 10**30}]}}
    response = api_client(operator).post("/api/v1/tasks", spec)
    assert response.status_code == 422
    assert "model.scripted.script.0.tokens" in fields(response) or any(
        f.endswith("tokens") for f in fields(response)
    )


@pytest.mark.parametrize("path", ["/api/v1/tasks", "/api/v1/tasks/{id}/cancel"])
def test_malformed_json_is_400_saying_where(api_client, operator, path):
    task = api_client(operator).post("/api/v1/tasks", SPEC).json()
    raw = '{"title": "t",\n "goal": oops}'
    response = post_raw(api_client(operator), path.format(id=task["id"]), raw)
    assert response.status_code == 400
    body = response.json()
    assert body["detail"] == "invalid JSON at line 2, column 10: Expecting value"
    assert body["errors"] == [{"field": "body", "message": body["detail"], "line": 2, "column": 10}]
