"""`/api/v1/templates` (issue #45 item 3): save a spec or a task's spec as a template, list and
read one's own, start a task from one with changed inputs. Bad input is a 422 naming the
field, as `POST /api/v1/tasks` names it, and creates nothing."""

from __future__ import annotations

import pytest

from tasks.models import AuditEntry, Task, TaskTemplate
from tests.conftest import ApiClient
from tests.factories import scripted_spec

pytestmark = pytest.mark.django_db

SPEC = {
    **scripted_spec(
        [{"call": "read_file", "args": {"path": "in.txt"}}, {"final": "ok"}], ["read_file"]
    ),
    "workspace": {"files": {"in.txt": "one\n", "keep.txt": "kept\n"}},
}


def fields(response) -> list[str]:
    return [e["field"] for e in response.json()["errors"]]


def test_a_creator_saves_lists_reads_and_starts_a_template_with_changed_inputs(creator):
    api = ApiClient(creator)
    saved = api.post("/api/v1/templates", {"name": "summarise", "spec": SPEC})
    assert saved.status_code == 201, saved.content
    template = saved.json()
    assert template["name"] == "summarise"
    assert template["spec"]["workspace"]["files"]["in.txt"] == "one\n"
    assert [t["id"] for t in api.get("/api/v1/templates").json()] == [template["id"]]
    assert api.get(f"/api/v1/templates/{template['id']}").json()["name"] == "summarise"
    assert AuditEntry.objects.filter(action="template_create", actor=creator).count() == 1

    started = api.post(
        template["start_url"],
        {"goal": "another goal", "workspace": {"files": {"in.txt": "two\n"}}},
    )
    assert started.status_code == 201, started.content
    task = Task.objects.get(id=started.json()["id"])
    assert task.status == "queued" and task.created_by == creator
    assert task.goal == "another goal"
    # The changed file replaced the saved one; the template's other file came along.
    assert task.spec["workspace"]["files"] == {"in.txt": "two\n", "keep.txt": "kept\n"}
    # The template itself is as it was saved.
    assert TaskTemplate.objects.get(id=template["id"]).spec["goal"] == SPEC["goal"]


def test_a_template_is_saved_from_a_task(creator, task_api):
    task = task_api.create(SPEC)
    api = ApiClient(creator)
    saved = api.post("/api/v1/templates", {"name": "again", "task_id": task["id"]})
    assert saved.status_code == 201, saved.content
    assert saved.json()["source_task_id"] == task["id"]
    assert saved.json()["spec"]["workspace"] == SPEC["workspace"]
    started = api.post(saved.json()["start_url"], {})
    assert started.status_code == 201
    assert started.json()["title"] == SPEC["title"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"spec": SPEC}, "name"),
        ({"name": "x"}, "body"),
        ({"name": "x", "spec": SPEC, "task_id": "00000000-0000-0000-0000-000000000001"}, "body"),
        ({"name": "x", "spec": {**SPEC, "budget": {"max_steps": 0}}}, "spec.budget.max_steps"),
        ({"name": "x", "spec": {**SPEC, "tools": ["launch_rockets"]}}, "spec.tools.0"),
        (
            {"name": "x", "spec": {**SPEC, "workspace": {"files": {"../out": "x"}}}},
            "spec.workspace.files",
        ),
        ({"name": "x", "spec": {**SPEC, "surprise": 1}}, "spec.surprise"),
    ],
)
def test_a_bad_template_is_422_naming_the_field(creator, body, field):
    response = ApiClient(creator).post("/api/v1/templates", body)
    assert response.status_code == 422, response.content
    assert field in fields(response)
    assert not TaskTemplate.objects.exists()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"budget": {"max_steps": 0}}, "budget.max_steps"),
        ({"tools": ["read_file", "launch_rockets"]}, "tools.1"),
        ({"budget": {"tool_timeout_s": 30, "turn_timeout_s": 10}}, "budget.tool_timeout_s"),
        ({"priority": "urgent"}, "priority"),
        ({"title": ""}, "title"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_a_bad_change_at_start_is_422_naming_the_field_and_starts_nothing(creator, changes, field):
    api = ApiClient(creator)
    template = api.post("/api/v1/templates", {"name": "t", "spec": SPEC}).json()
    response = api.post(template["start_url"], changes)
    assert response.status_code == 422, response.content
    assert fields(response) == [field]
    assert not Task.objects.exists()


def test_the_task_api_names_a_spec_field_as_the_templates_do(creator):
    """The task's spec is the whole body of POST /api/v1/tasks: its fields are named without
    the endpoint's parameter name (it said `spec.budget.max_steps`)."""
    response = ApiClient(creator).post("/api/v1/tasks", {**SPEC, "budget": {"max_steps": 0}})
    assert response.status_code == 422
    assert fields(response) == ["budget.max_steps"]
