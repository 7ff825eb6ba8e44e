"""The `replay` model answers with another task's recorded model decisions (its calls'
arguments and texts): a task may replay only a task its creator may read (`access_task`),
checked at creation for the task's model and every sub-agent's model (422 naming the field),
and again when a sub-agent starts, as the parent's creator. Every role reads every task, so
a creator may replay another user's task; a user who may not read (no role, or a creator
since deleted) replays nothing, and the answer never tells which task ids exist."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import Group

from tasks.models import Task, ToolCall
from tasks.services import SpecError
from tests.factories import run_in_process, scripted_model, scripted_task, spec_task

pytestmark = pytest.mark.django_db(transaction=True)


def replay(task_id) -> dict:
    return {"kind": "replay", "task_id": str(task_id)}


@pytest.fixture
def recorded(operator):
    """Another user's finished task with a recorded decision."""
    task = scripted_task([{"final": "the recorded answer"}], user=operator)
    assert run_in_process(task) == "succeeded", task.error_message
    return task


def test_a_creator_may_replay_a_task_of_another_user(api_client, creator, recorded):
    spec = {"title": "again", "goal": "g", "model": replay(recorded.id)}
    response = api_client(creator).post("/api/v1/tasks", spec)
    assert response.status_code == 201, response.content
    task = Task.objects.get(id=response.json()["id"])
    assert run_in_process(task) == "succeeded", (task.error_class, task.error_message)
    assert task.result == "the recorded answer"


@pytest.mark.parametrize("source", ["unknown", "malformed"])
def test_an_unreadable_replay_source_is_422_naming_the_field(api_client, creator, source):
    task_id = uuid.uuid4() if source == "unknown" else "../../etc"
    spec = {"title": "t", "goal": "g", "model": replay(task_id)}
    response = api_client(creator).post("/api/v1/tasks", spec)
    assert response.status_code == 422, response.content
    assert response.json()["errors"] == [
        {"field": "model.task_id", "message": f"no task {task_id} that you may read"}
    ]
    assert not Task.objects.exists()


def test_a_sub_agent_replaying_an_unknown_task_is_refused_at_creation(api_client, creator):
    ghost = uuid.uuid4()
    spec = {
        "title": "group",
        "goal": "g",
        "model": scripted_model({"final": "x"}),
        "agents": {"helper": {"model": replay(ghost), "tools": []}},
    }
    response = api_client(creator).post("/api/v1/tasks", spec)
    assert response.status_code == 422, response.content
    assert [e["field"] for e in response.json()["errors"]] == ["agents.helper.model.task_id"]
    assert not Task.objects.exists()


def test_a_sub_agent_replays_nothing_once_its_creator_may_not_read(creator, recorded):
    parent = spec_task(
        {
            "title": "group",
            "goal": "g",
            "model": scripted_model(
                {"call": "delegate", "args": {"agent": "helper", "goal": "copy"}},
                {"final": "parent done"},
            ),
            "agents": {"helper": {"model": replay(recorded.id), "tools": []}},
        },
        user=creator,
    )
    creator.groups.remove(Group.objects.get(name="creators"))
    run_in_process(parent)
    call = ToolCall.objects.get(task=parent, tool="delegate")
    assert call.status == "failed"
    assert f"no task {recorded.id} that you may read" in call.error_message
    assert not Task.objects.filter(parent=parent).exists()


def test_a_task_with_no_creator_replays_nothing(recorded):
    with pytest.raises(SpecError) as refused:
        spec_task({"title": "t", "goal": "g", "model": replay(recorded.id)}, user=None)
    assert refused.value.field == "model.task_id"
