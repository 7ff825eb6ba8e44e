"""Delegation on real workers: children are tasks of their own, the parent waits without a
worker, results (and failures) flow back, cancel propagates down."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_decode
from tasks.models import Task
from tests.multiagent.conftest import agent, delegate, group_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_parent_delegates_to_three_children_in_parallel_and_gets_their_answers(
    fleet, task_api, api_client, viewer
):
    fleet.worker(2)
    agents = {
        name: agent(
            {"call": "write_file", "args": {"path": f"{name}.txt", "content": name}},
            {"final": f"answer from {name}"},
            tools=["write_file"],
        )
        for name in ("north", "south", "west")
    }
    done = task_api.run(
        group_spec(
            {"calls": [delegate(name, f"survey the {name}", region=name) for name in agents]},
            {"final": "combined"},
            agents=agents,
        ),
        timeout=90,
    )
    assert done["status"] == "succeeded" and done["result"] == "combined"
    assert len(done["children"]) == 3

    children = [task_api.get(child_id) for child_id in done["children"]]
    assert {c["agent_name"] for c in children} == set(agents)
    for child in children:
        assert child["parent_id"] == done["id"] and child["status"] == "succeeded"
        assert child["result"] == f"answer from {child['agent_name']}"
        # Its own workspace, ledger and checkpoints.
        task = Task.objects.get(id=child["id"])
        name = child["agent_name"]
        assert (task.workspace_path / f"{name}.txt").read_text() == name
        assert Checkpoint.objects.filter(task=task).exists()
        assert f'"region": "{name}"' in child["goal"]

    calls = api_client(viewer).get(f"/api/v1/tasks/{done['id']}/tool-calls").json()
    assert [(c["tool"], c["status"]) for c in calls] == [("delegate", "succeeded")] * 3
    answers = {c["result"]["agent"]: c["result"]["answer"] for c in calls}
    assert answers == {name: f"answer from {name}" for name in agents}
    # The answers reached the parent's model as the calls' observations.
    head = checkpoint_decode(Checkpoint.objects.get(id=done["head_checkpoint"]))
    observed = " ".join(m.content for m in head.state.messages if m.role == "tool")
    assert all(f"answer from {name}" in observed for name in agents)
    # All three children were started in the same turn, before any of them finished.
    parent = Task.objects.get(id=done["id"])
    waits = parent.events.filter(type="status", payload__to="waiting_children")
    assert waits.count() == 1


def test_a_failed_child_is_reported_to_the_parent_as_its_call_result(fleet, task_api):
    fleet.worker(2)
    agents = {
        "fragile": agent(
            {"call": "flaky", "args": {"key": "x", "fail_times": 5, "error": "permanent"}},
            {"call": "flaky", "args": {"key": "x", "fail_times": 5, "error": "permanent"}},
            {"final": "never"},
            tools=["flaky"],
            budget={"max_steps": 1},
        ),
        "steady": agent({"final": "fine"}),
    }
    done = task_api.run(
        group_spec(
            {"calls": [delegate("fragile", "try"), delegate("steady", "relax")]},
            {"final": "reported"},
            agents=agents,
        ),
        timeout=90,
    )
    children = {c["agent_name"]: c for c in map(task_api.get, done["children"])}
    assert children["fragile"]["status"] == "failed"
    assert children["fragile"]["error_class"] == "budget_exceeded"
    calls = task_api.client.get(f"/api/v1/tasks/{done['id']}/tool-calls").json()
    by_status = {c["status"]: c for c in calls}
    assert by_status["failed"]["error_class"] == "child_failed"
    assert "budget_exceeded" in by_status["failed"]["result"]["observation"]
    assert by_status["succeeded"]["result"]["answer"] == "fine"


def test_canceling_the_parent_stops_every_child(fleet, task_api, wait_for):
    fleet.worker(2)
    slow = agent(
        {"call": "sleep", "args": {"seconds": 30}},
        {"final": "too late"},
        tools=["sleep"],
    )
    parent = task_api.create(
        group_spec(
            {"calls": [delegate("slow", "wait"), delegate("slow", "wait more")]},
            {"final": "never"},
            agents={"slow": slow},
        )
    )
    task_api.wait(parent["id"], "waiting_children")
    children = wait_for(lambda: task_api.get(parent["id"])["children"], 10)
    for child_id in children:
        task_api.wait(child_id, "running")
    response = task_api.client.post(f"/api/v1/tasks/{parent['id']}/cancel", {"reason": "stop"})
    assert response.status_code == 200, response.content
    assert task_api.get(parent["id"])["status"] == "canceled"
    for child_id in children:
        task_api.wait(child_id, "canceled", timeout=20)


def test_a_child_budget_is_capped_by_what_the_parent_has_left(fleet, task_api):
    fleet.worker(1)
    greedy = agent({"final": "done"}, budget={"max_steps": 500})
    done = task_api.run(
        group_spec(
            {"call": "delegate", "args": {"agent": "greedy", "goal": "work"}},
            {"final": "ok"},
            agents={"greedy": greedy},
            budget={"max_steps": 5},
        ),
        timeout=60,
    )
    child = task_api.get(done["children"][0])
    assert child["spec"]["budget"]["max_steps"] <= 5


def test_an_unknown_agent_is_refused_to_the_model_not_started(fleet, task_api):
    fleet.worker(1)
    done = task_api.run(
        group_spec(
            {"call": "delegate", "args": {"agent": "ghost", "goal": "haunt"}},
            {"final": "ok"},
            agents={"real": agent({"final": "x"})},
        ),
        timeout=60,
    )
    assert done["children"] == []
    calls = task_api.client.get(f"/api/v1/tasks/{done['id']}/tool-calls").json()
    assert calls[0]["status"] == "failed" and "unknown agent 'ghost'" in calls[0]["error_message"]


def test_delegate_without_agents_and_bad_agent_tools_are_422(api_client, operator):
    client = api_client(operator)
    base = {"title": "t", "goal": "g", "model": {"kind": "scripted", "script": [{"final": "x"}]}}
    response = client.post("/api/v1/tasks", {**base, "tools": ["delegate"]})
    assert response.status_code == 422
    response = client.post(
        "/api/v1/tasks",
        {**base, "agents": {"a": {"model": base["model"], "tools": ["no_such_tool"]}}},
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "agents.a.tools.0"
    response = client.post(
        "/api/v1/tasks", {**base, "agents": {"Bad Name": {"model": base["model"]}}}
    )
    assert response.status_code == 422


def test_a_child_review_shows_in_the_inbox_with_its_parent_named(
    fleet, task_api, wait_for, client, operator
):
    fleet.worker(1)
    careful = agent(
        {"call": "write_file", "args": {"path": "plan.md", "content": "go"}},
        {"final": "written"},
        tools=["write_file"],
        review={"always": ["write_file"]},
    )
    parent = task_api.create(
        group_spec(
            {"call": "delegate", "args": {"agent": "careful", "goal": "write the plan"}},
            {"final": "ok"},
            agents={"careful": careful},
            title="launch",
        )
    )
    api = task_api.client
    reviews = wait_for(lambda: api.get("/api/v1/reviews?status=pending").json(), 30)
    assert reviews[0]["parent_task_id"] == parent["id"]
    assert reviews[0]["parent_task_title"] == "launch"
    browser_session = client
    browser_session.force_login(operator)
    page = browser_session.get("/reviews/")
    assert b'data-testid="review-parent"' in page.content and b"launch" in page.content
    response = api.post(
        f"/api/v1/reviews/{reviews[0]['id']}/decision",
        {"decision": "approve", "arguments_hash": reviews[0].get("arguments_hash", "")},
    )
    assert response.status_code == 200, response.content
    done = task_api.wait(parent["id"], "succeeded", timeout=60)
    assert task_api.get(done["children"][0])["result"] == "written"
