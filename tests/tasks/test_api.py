"""The tasks API contract (DESIGN §6): status codes, field-named errors, never a 500."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from tasks.models import Task
from tasks.services import api_token_create

pytestmark = pytest.mark.django_db

SPEC = {
    "title": "write a file",
    "goal": "write hello to a.txt",
    "model": {
        "kind": "scripted",
        "script": [
            {"call": "write_file", "args": {"path": "a.txt", "content": "hello"}},
            {"final": "done"},
        ],
    },
    "tools": ["write_file"],
}


@pytest.fixture
def client_for():
    def make(user) -> Client:
        return Client(headers={"Authorization": f"Bearer {api_token_create(user=user)}"})

    return make


def test_create_returns_201_and_the_task_is_durably_queued(operator, client_for):
    response = client_for(operator).post("/api/v1/tasks", SPEC, content_type="application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    task = Task.objects.get(id=body["id"])
    assert task.status == "queued" and body["status"] == "queued"
    assert task.created_by == operator
    assert task.events.filter(type="status", payload__to="queued").exists()


def test_bad_spec_gets_422_naming_the_field(operator, client_for):
    bad = {**SPEC, "budget": {"max_steps": 0}}
    response = client_for(operator).post("/api/v1/tasks", bad, content_type="application/json")
    assert response.status_code == 422
    fields = [e["field"] for e in response.json()["errors"]]
    assert any(f.endswith("budget.max_steps") for f in fields), fields
    assert not Task.objects.exists()


def test_unknown_tool_in_spec_gets_422(operator, client_for):
    bad = {**SPEC, "tools": ["write_file", "launch_rockets"]}
    response = client_for(operator).post("/api/v1/tasks", bad, content_type="application/json")
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"] == "tools.1" and "launch_rockets" in error["message"]


def test_timeouts_out_of_order_get_422(operator, client_for):
    bad = {**SPEC, "budget": {"tool_timeout_s": 30, "turn_timeout_s": 10, "session_timeout_s": 60}}
    response = client_for(operator).post("/api/v1/tasks", bad, content_type="application/json")
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "budget.tool_timeout_s"


@pytest.mark.parametrize("body", ["not json", "[]", '{"title": 5}'])
def test_malformed_bodies_never_500(operator, client_for, body):
    response = client_for(operator).post("/api/v1/tasks", body, content_type="application/json")
    assert 400 <= response.status_code < 500


def test_escaping_workspace_path_in_spec_gets_422(operator, client_for):
    bad = {**SPEC, "workspace": {"files": {"../outside.txt": "x"}}}
    response = client_for(operator).post("/api/v1/tasks", bad, content_type="application/json")
    assert response.status_code == 422


def test_no_credentials_gets_401():
    assert Client().get("/api/v1/tasks").status_code == 401
    assert Client(headers={"Authorization": "Bearer nope"}).get("/api/v1/tasks").status_code == 401


@pytest.mark.parametrize("path", ["", "/checkpoints", "/events", "/tool-calls"])
def test_unknown_or_malformed_id_gets_404(viewer, client_for, path):
    client = client_for(viewer)
    assert client.get(f"/api/v1/tasks/{uuid.uuid4()}{path}").status_code == 404
    assert client.get(f"/api/v1/tasks/not-a-uuid{path}").status_code == 404


def test_viewer_can_read_but_not_cancel(operator, viewer, client_for):
    task_id = (
        client_for(operator)
        .post("/api/v1/tasks", SPEC, content_type="application/json")
        .json()["id"]
    )
    viewer_client = client_for(viewer)
    assert viewer_client.get(f"/api/v1/tasks/{task_id}").status_code == 200
    listing = viewer_client.get("/api/v1/tasks?status=queued").json()
    assert [t["id"] for t in listing["items"]] == [task_id]
    assert viewer_client.post(f"/api/v1/tasks/{task_id}/cancel").status_code == 403
    assert Task.objects.get(id=task_id).status == "queued"


def test_operator_cancels_a_queued_task_and_a_second_cancel_conflicts(operator, client_for):
    client = client_for(operator)
    task_id = client.post("/api/v1/tasks", SPEC, content_type="application/json").json()["id"]
    response = client.post(
        f"/api/v1/tasks/{task_id}/cancel", {"reason": "not needed"}, content_type="application/json"
    )
    assert response.status_code == 200 and response.json()["status"] == "canceled"
    again = client.post(f"/api/v1/tasks/{task_id}/cancel", content_type="application/json")
    assert again.status_code == 409


def test_openapi_schema_is_served(viewer, client_for):
    schema = client_for(viewer).get("/api/v1/openapi.json").json()
    assert "/api/v1/tasks" in schema["paths"]
