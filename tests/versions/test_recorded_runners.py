"""The graph and SDK runners record `versions` too (issue #43 item 1): a LangGraph task's
graph checkpoints carry its graph's structure hash, an SDK task's checkpoints its agent's
definition hash; the reviews they open carry the same versions."""

from __future__ import annotations

import uuid

import pytest

from agent.jobs import run_task
from checkpoints.models import Checkpoint, GraphCheckpoint
from checkpoints.versions import checkpoint_versions, version_body
from harness_base.versions import harness_version
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.factories import graph_spec

pytestmark = pytest.mark.django_db(transaction=True)


def test_graph_checkpoints_and_reviews_record_the_graph_structure(task_api):
    spec = graph_spec(
        "release_bot", {"changes": ["fix login"], "current": "1.4.2"}, title="r", goal="g"
    )
    task = task_api.create(spec)
    assert run_task(task["id"]) == "paused"
    rows = GraphCheckpoint.objects.filter(task_id=task["id"])
    assert rows.exists()
    versions = rows.last().versions
    assert all(row.versions == versions for row in rows)
    assert versions["harness"] == harness_version()
    graph = version_body(versions["graph"])
    assert "__start__" in graph["nodes"] and len(graph["nodes"]) > 2
    assert all(len(edge) == 2 for edge in graph["edges"])
    assert set(graph) == {"nodes", "edges", "interrupt_before", "interrupt_after"}
    assert versions["spec"] == canonical_hash(Task.objects.get(id=task["id"]).spec)
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.versions == versions
    assert checkpoint_versions(task_id=task["id"]) == versions


def test_pydantic_ai_checkpoints_and_reviews_record_the_agent_definition(task_api):
    task = task_api.create(
        {
            "title": "notes",
            "goal": "write and publish the release notes",
            "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "faster search"},
        }
    )
    assert run_task(task["id"]) == "paused"
    versions = Checkpoint.objects.filter(task_id=task["id"]).last().versions
    agent = version_body(versions["agent"])
    assert {"write_note", "publish"} <= set(agent["tools"])
    assert set(versions["tools"]) >= {"write_note", "publish"}
    assert version_body(versions["tools"]["publish"])["properties"]
    assert agent["instructions"] or agent["system_prompts"]
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.versions == versions


def test_openai_agents_checkpoints_and_reviews_record_the_agent_definition(
    task_api, harness_yaml, harness_dirs, quiet_watchdog
):
    harness_yaml('openai_agents:\n  writer: "tests.durable.openai_agents:writer"\n')
    task = task_api.create(
        {
            "title": "writer",
            "goal": f"task {uuid.uuid4().hex}: do it",
            "agent": {"kind": "openai-agents", "name": "writer"},
        }
    )
    assert run_task(task["id"]) == "paused"
    versions = Checkpoint.objects.filter(task_id=task["id"]).last().versions
    agent = version_body(versions["agent"])
    assert agent["start"] == "writer"
    assert "publish" in agent["agents"]["writer"]["tools"]
    assert "publish" in versions["tools"]
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.versions == versions


def test_a_graph_rollback_s_fork_keeps_the_versions_of_its_base(task_api, api_client, operator):
    spec = graph_spec(
        "release_bot", {"changes": ["fix login"], "current": "1.4.2"}, title="r", goal="g"
    )
    task = task_api.create(spec)
    assert run_task(task["id"]) == "paused"
    api = api_client(operator)
    listed = api.get(f"/api/v1/tasks/{task['id']}/graph-checkpoints").json()
    base = listed[-2]
    assert base["versions"]["graph"]
    response = api.post(
        f"/api/v1/tasks/{task['id']}/rollback",
        {"checkpoint_id": base["checkpoint_id"], "resume": False, "reason": "again"},
    )
    assert response.status_code == 200, response.content
    [fork] = [
        c
        for c in api.get(f"/api/v1/tasks/{task['id']}/graph-checkpoints").json()
        if c["source"] == "fork"
    ]
    assert fork["versions"] == base["versions"]
