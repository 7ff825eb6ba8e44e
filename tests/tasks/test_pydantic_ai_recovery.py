"""Pydantic AI tasks and the harness's recovery and policy, in this process (the RQ job
function): retry re-runs the failed call and replays the rest, a cancel during a review asks
again on resume, a deny rule refuses a call (the agent is told)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agent.jobs import run_task
from review.models import ReviewRequest
from review.services import reviews_expire_overdue
from tasks.models import Task, ToolCall
from tests.durable.pai_agents import runs

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
retry: {initial_s: 0.2, factor: 2, max_s: 5, jitter: full, max_attempts: 4}
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
review_rules:
  - {name: no-rm-rf-root, tool: shell, command_regex: "rm\\\\s+-rf\\\\s+/", action: deny,
     reason: "Deleting from the filesystem root is never allowed."}
pydantic_ai_agents:
  fragile: "tests.durable.pai_agents:fragile_agent"
  denied: "tests.durable.pai_agents:denied"
  long_run: "tests.durable.pai_agents:long_run"
  release_notes: "examples.pydantic_ai_agent:agent"
"""


@pytest.fixture(autouse=True)
def _config(harness_yaml, harness_dirs) -> None:
    harness_yaml(CONFIG)


def spec(name: str, marker_dir) -> dict:
    return {
        "title": name,
        "goal": f"run {name}",
        "agent": {
            "kind": "pydantic-ai",
            "name": name,
            "input": json.dumps({"marker_dir": str(marker_dir)}),
        },
    }


def test_retry_runs_the_failed_call_again_and_replays_the_one_that_succeeded(
    task_api, api_client, operator, tmp_path
):
    task = task_api.create(spec("fragile", tmp_path))
    assert run_task(task["id"]) == "failed"
    failed = task_api.get(task["id"])
    assert "agent_error" in json.dumps(failed)
    assert "disk full" in json.dumps(failed)
    assert ToolCall.objects.get(task_id=task["id"], tool="fragile").status == "failed"

    workspace = Task.objects.get(id=task["id"]).workspace_path
    (workspace / "ok").write_text("")
    response = api_client(operator).post(f"/api/v1/tasks/{task['id']}/retry", {"reason": "fixed"})
    assert response.status_code == 200, response.content
    assert run_task(task["id"]) == "succeeded"

    assert runs(tmp_path) == ["write:a.txt=a1", "fragile", "fragile"]
    calls = {c.tool: c for c in ToolCall.objects.filter(task_id=task["id"])}
    assert (calls["write"].status, calls["write"].attempts) == ("succeeded", 1)
    assert (calls["fragile"].status, calls["fragile"].attempts) == ("succeeded", 2)
    assert (workspace / "b.txt").read_text() == "b1"


def test_a_deny_rule_refuses_the_call_and_the_agent_is_told(task_api, tmp_path):
    task = task_api.create(spec("denied", tmp_path))
    assert run_task(task["id"]) == "succeeded"
    assert runs(tmp_path) == []
    call = ToolCall.objects.get(task_id=task["id"])
    assert (call.status, call.error_class) == ("denied", "denied")
    assert "denied by policy" in task_api.get(task["id"])["result"]
    assert not ReviewRequest.objects.filter(task_id=task["id"]).exists()


def test_a_cancel_during_review_asks_again_when_resumed(task_api, api_client, operator):
    notes = {
        "title": "notes",
        "goal": "notes",
        "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "x"},
    }
    task = task_api.create(notes)
    api = api_client(operator)
    assert run_task(task["id"]) == "paused"
    first = ReviewRequest.objects.get(task_id=task["id"])
    assert api.post(f"/api/v1/tasks/{task['id']}/cancel", {"reason": "wait"}).status_code == 200
    assert task_api.get(task["id"])["status"] == "canceled"
    first.refresh_from_db()
    assert first.status == "canceled"

    assert api.post(f"/api/v1/tasks/{task['id']}/resume", {"reason": "go"}).status_code == 200
    assert run_task(task["id"]) == "paused"
    again = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert again.tool == "publish" and again.tool_call_id == first.tool_call_id
    assert api.decide(again.id, decision="approve").status_code == 200
    assert run_task(task["id"]) == "succeeded"
    workspace = Task.objects.get(id=task["id"]).workspace_path
    assert (workspace / "published.log").read_text().count("#general") == 1
    # write_note ran once, before the first review; the resumed runs replayed it.
    assert ToolCall.objects.get(task_id=task["id"], tool="write_note").attempts == 1


def test_the_task_page_shows_the_agents_calls_and_checkpoints(task_api, as_user, operator):
    notes = {
        "title": "notes",
        "goal": "notes",
        "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "x"},
    }
    task = task_api.create(notes)
    run_task(task["id"])
    client = as_user(operator)
    for tab in ("", "?tab=calls", "?tab=checkpoints", "?tab=events"):
        response = client.get(f"/tasks/{task['id']}/{tab}")
        assert response.status_code == 200, tab
    page = client.get(f"/tasks/{task['id']}/?tab=calls").content.decode()
    assert "write_note" in page and "publish" in page


def test_an_expired_review_is_a_denial_the_agent_hears_of(task_api):
    notes = {
        "title": "notes",
        "goal": "notes",
        "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "x"},
    }
    task = task_api.create(notes)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    ReviewRequest.objects.filter(pk=review.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert reviews_expire_overdue() == 1
    assert task_api.get(task["id"])["status"] == "queued"

    assert run_task(task["id"]) == "succeeded"
    assert "expired before a decision" in task_api.get(task["id"])["result"]
    assert ToolCall.objects.get(task_id=task["id"], tool="publish").status == "rejected"
    workspace = Task.objects.get(id=task["id"]).workspace_path
    assert not (workspace / "published.log").exists()


def test_an_approval_that_no_longer_holds_is_asked_again_before_the_call_runs(
    task_api, api_client, operator
):
    notes = {
        "title": "notes",
        "goal": "notes",
        "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "x"},
    }
    task = task_api.create(notes)
    api = api_client(operator)
    assert run_task(task["id"]) == "paused"
    first = ReviewRequest.objects.get(task_id=task["id"])
    assert api.decide(first.id, decision="approve").status_code == 200
    # The approval's deadline passes before a worker resumes the agent with it.
    ReviewRequest.objects.filter(pk=first.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert run_task(task["id"]) == "paused"
    workspace = Task.objects.get(id=task["id"]).workspace_path
    assert not (workspace / "published.log").exists()
    again = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert again.reopened_from_id == first.id and "expired" in " ".join(again.changes)
    assert api.decide(again.id, decision="approve").status_code == 200
    assert run_task(task["id"]) == "succeeded"
    assert (workspace / "published.log").read_text().count("#general") == 1


def test_a_run_longer_than_the_sdks_default_request_limit_is_bounded_by_the_task_budget(
    task_api, tmp_path
):
    """Pydantic AI stops a run after 50 model requests by default; a task's own budget
    (max_steps) is what bounds it here, both ways."""
    long = {
        "title": "long run",
        "goal": "tick",
        "agent": {"kind": "pydantic-ai", "name": "long_run", "input": '{"steps": 60}'},
        "budget": {"max_steps": 70},
    }
    task = task_api.create(long)
    assert run_task(task["id"]) == "succeeded"
    assert "done after 60 turns" in task_api.get(task["id"])["result"]
    assert ToolCall.objects.filter(task_id=task["id"], tool="tick").count() == 60

    short = task_api.create({**long, "budget": {"max_steps": 20}})
    run_task(short["id"])
    stopped = task_api.get(short["id"])
    assert stopped["status"] == "failed"
    assert "max_steps=20" in str(stopped)
