"""LangGraph graphs as tasks (tasks.graph_runner): the registered examples run under the task
state machine; interrupts become reviews and decisions resume the graph. These call the RQ job
function in this process; test_graph_workers.py drives the same through real workers."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tasks.jobs import run_task

pytestmark = pytest.mark.django_db(transaction=True)

RELEASE = {
    "title": "release",
    "goal": "cut a release",
    "agent": {
        "kind": "langgraph",
        "graph": "release_bot",
        "input": {"changes": ["fix login", "faster search"], "current": "1.4.2"},
    },
}


def decide(api, review_id, body):
    """POST a decision; an approval sends the arguments_hash the review shows right now."""
    if body.get("decision") == "approve" and "arguments_hash" not in body:
        body = {
            **body,
            "arguments_hash": api.get(f"/api/v1/reviews/{review_id}").json()["arguments_hash"],
        }
    return api.post(f"/api/v1/reviews/{review_id}/decision", body)


def test_spec_needs_exactly_one_of_model_and_agent(task_api):
    both = {**RELEASE, "model": {"kind": "scripted", "script": [{"final": "x"}]}}
    response = task_api.client.post("/api/v1/tasks", both)
    assert response.status_code in (400, 422), response.content
    neither = {"title": "t", "goal": "g"}
    assert task_api.client.post("/api/v1/tasks", neither).status_code in (400, 422)


def test_unregistered_graph_is_refused_naming_the_field(task_api):
    spec = {**RELEASE, "agent": {"kind": "langgraph", "graph": "nope"}}
    response = task_api.client.post("/api/v1/tasks", spec)
    assert response.status_code in (400, 422)
    assert "agent.graph" in response.content.decode()


def test_graph_pauses_at_its_interrupt_and_finishes_after_approval(task_api, api_client, operator):
    task = task_api.create(RELEASE)
    assert run_task(task["id"]) == "paused"
    assert task_api.get(task["id"])["status"] == "waiting_review"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.kind == "langgraph"
    assert review.original_arguments["version"] == "1.5.0"
    assert review.interrupt["allowed"] == ["approve", "reject", "respond"]

    response = decide(api_client(operator), review.id, {"decision": "approve"})
    assert response.status_code == 200, response.content
    assert run_task(task["id"]) == "succeeded"

    done = task_api.get(task["id"])
    assert done["status"] == "succeeded"
    assert '"published": "1.5.0"' in done["result"]
