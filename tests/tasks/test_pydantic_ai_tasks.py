"""Pydantic AI agents as tasks (agent.pydantic_ai_runner): the bundled example runs under the
task state machine; a tool with requires_approval=True pauses for a review, and the decision
goes back as ToolApproved / ToolApproved(override_args) / ToolDenied. These call the RQ job
function in this process; tests/durable/test_pydantic_ai_workers.py drives real workers."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest
from tasks.models import Task, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

NOTES = {
    "title": "release notes",
    "goal": "write and publish the release notes",
    "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "faster search"},
}


def test_spec_names_a_registered_agent_or_is_refused_naming_the_field(task_api):
    spec = {**NOTES, "agent": {**NOTES["agent"], "name": "nope"}}
    response = task_api.client.post("/api/v1/tasks", spec)
    assert response.status_code in (400, 422)
    assert "agent.name" in response.content.decode()
    assert "release_notes" in response.content.decode()
    bad_kind = {**NOTES, "agent": {"kind": "pydantic-ai", "graph": "release_notes"}}
    response = task_api.client.post("/api/v1/tasks", bad_kind)
    assert response.status_code in (400, 422)
    assert "agent" in response.content.decode()


def test_a_tool_requiring_approval_pauses_and_runs_once_approved(task_api, api_client, operator):
    task = task_api.create(NOTES)
    assert run_task(task["id"]) == "paused"
    assert task_api.get(task["id"])["status"] == "waiting_review"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.kind == "pydantic-ai"
    assert review.tool == "publish"
    assert review.original_arguments == {"channel": "#general", "path": "notes/release.md"}
    workspace = Task.objects.get(id=task["id"]).workspace_path
    assert "faster search" in (workspace / "notes/release.md").read_text()
    assert not (workspace / "published.log").exists()

    response = api_client(operator).decide(review.id, decision="approve")
    assert response.status_code == 200, response.content
    assert run_task(task["id"]) == "succeeded"

    done = task_api.get(task["id"])
    assert "published notes/release.md to #general" in done["result"]
    assert (workspace / "published.log").read_text().count("#general") == 1
    calls = {c.tool: c for c in ToolCall.objects.filter(task_id=task["id"])}
    assert calls["write_note"].status == "succeeded" and calls["write_note"].attempts == 1
    assert calls["publish"].status == "succeeded" and calls["publish"].attempts == 1


def test_an_edited_approval_runs_with_the_edited_arguments(task_api, api_client, operator):
    task = task_api.create(NOTES)
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])
    edited = {"channel": "#releases", "path": "notes/release.md"}
    response = api_client(operator).decide(review.id, decision="approve", arguments=edited)
    assert response.status_code == 200, response.content
    assert run_task(task["id"]) == "succeeded"

    assert "published notes/release.md to #releases" in task_api.get(task["id"])["result"]
    call = ToolCall.objects.get(task_id=task["id"], tool="publish")
    assert call.status == "succeeded" and call.arguments == edited
    log = (Task.objects.get(id=task["id"]).workspace_path / "published.log").read_text()
    assert "#releases" in log and "#general" not in log


def test_a_rejection_reaches_the_agent_with_the_comment(task_api, api_client, operator):
    task = task_api.create(NOTES)
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])
    body = {"decision": "reject", "comment": "freeze week"}
    assert api_client(operator).decide(review.id, **body).status_code == 200
    assert run_task(task["id"]) == "succeeded"

    result = task_api.get(task["id"])["result"]
    assert "freeze week" in result
    assert ToolCall.objects.get(task_id=task["id"], tool="publish").status == "rejected"
    workspace = Task.objects.get(id=task["id"]).workspace_path
    assert not (workspace / "published.log").exists()
