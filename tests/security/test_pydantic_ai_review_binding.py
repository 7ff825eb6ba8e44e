"""A Pydantic AI approval is bound to the arguments the reviewer saw: a decision naming other
arguments is refused (409) and nothing runs; an edit that a deny rule matches cannot be
approved (422); the approved call runs once, with exactly the approved arguments."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
review_rules:
  - {name: no-secrets, tool: publish, path_glob: "secret/**", action: deny,
     reason: "Secret notes are never published."}
pydantic_ai_agents:
  release_notes: "examples.pydantic_ai_agent:agent"
"""
NOTES = {
    "title": "notes",
    "goal": "write and publish the notes",
    "agent": {"kind": "pydantic-ai", "name": "release_notes"},
}


@pytest.fixture(autouse=True)
def _config(harness_yaml, harness_dirs) -> None:
    harness_yaml(CONFIG)


def test_an_approval_of_other_arguments_is_refused_and_nothing_runs(task_api, api_client, operator):
    task = task_api.create(NOTES)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    api = api_client(operator)

    missing = api.post(f"/api/v1/reviews/{review.id}/decision", {"decision": "approve"})
    assert missing.status_code == 422 and "arguments_hash" in missing.content.decode()
    stale = api.decide(
        review.id,
        decision="approve",
        arguments_hash=canonical_hash({"channel": "#everyone", "path": "notes/release.md"}),
    )
    assert stale.status_code == 409
    denied_edit = api.decide(
        review.id, decision="approve", arguments={"channel": "#general", "path": "secret/x.md"}
    )
    assert denied_edit.status_code == 422 and "arguments" in denied_edit.content.decode()
    review.refresh_from_db()
    assert review.status == "pending"
    assert task_api.get(task["id"])["status"] == "waiting_review"
    workspace = Task.objects.get(id=task["id"]).workspace_path
    assert not (workspace / "published.log").exists()
    # The goal was the prompt (no input): the notes hold it.
    assert "write and publish the notes" in (workspace / "notes/release.md").read_text()

    assert api.decide(review.id, decision="approve").status_code == 200
    assert run_task(task["id"]) == "succeeded"
    call = ToolCall.objects.get(task_id=task["id"], tool="publish")
    assert call.arguments == review.original_arguments and call.attempts == 1
    assert (workspace / "published.log").read_text().count("\n") == 1
