"""OpenAI Agents SDK agents as tasks (agent/openai_agents_runner/), run by the RQ job function
in this process with the SDK's `Model` interface scripted (tests/durable/openai_agents.py):
reviews from the API, edits, rejections, policy, guardrails, handoffs, rollback and retry.
tests/durable/test_openai_agents_durable.py drives the same through real rqworkers."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agent.jobs import run_task
from checkpoints.models import Checkpoint
from checkpoints.recovery import checkpoint_rollback, task_retry
from checkpoints.services import checkpoint_decode
from review.models import ReviewRequest
from tasks.models import Task, ToolCall
from tests.durable.openai_agents import executions

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
openai_agents:
  writer: "tests.durable.openai_agents:writer"
  slow_writer: "tests.durable.openai_agents:slow_writer"
  guarded: "tests.durable.openai_agents:guarded"
  triage: "tests.durable.openai_agents:triage"
  release_writer: "examples.openai_agents_agent:agent"
  hosted: "tests.durable.openai_agents:hosted"
  flaky_writer: "tests.durable.openai_agents:flaky_writer"
  notes_keeper:
    agent: "tests.durable.openai_agents:notes_agent"
    mcp_servers: {notes: {ro_paths: ["{harness}/examples"]}}
  remote_allowed:
    agent: "tests.security.openai_mcp_agents:remote"
    mcp_servers: {somewhere-remote: {remote: true}}
"""


@pytest.fixture(autouse=True)
def _config(harness_dirs, harness_yaml, quiet_watchdog):
    harness_yaml(CONFIG)


def agent_spec(name: str, key: str = "", **extra) -> dict:
    return {
        "title": name,
        "goal": f"task {key or uuid.uuid4().hex}: do it",
        "agent": {"kind": "openai-agents", "name": name, **extra},
    }


def calls(task_id) -> dict[str, str]:
    return {
        f"{row.tool}:{row.arguments.get('path') or row.arguments.get('key') or ''}": row.status
        for row in ToolCall.objects.filter(task_id=task_id)
    }


def test_unregistered_agent_is_refused_naming_the_field(task_api):
    response = task_api.client.post("/api/v1/tasks", agent_spec("nope"))
    assert response.status_code in (400, 422), response.content
    assert "agent.name" in response.content.decode()
    bad = {**agent_spec("writer"), "agent": {"kind": "openai-agents", "name": "writer", "x": 1}}
    assert task_api.client.post("/api/v1/tasks", bad).status_code in (400, 422)


def test_a_tool_with_needs_approval_pauses_and_approval_runs_it(task_api, api_client, operator):
    task = task_api.create(agent_spec("writer"))
    assert run_task(task["id"]) == "paused"
    assert task_api.get(task["id"])["status"] == "waiting_review"
    # The tools no rule reviews ran through the ledger; publish waits for a person.
    assert calls(task["id"]) == {
        "write_file:a.txt": "succeeded",
        "write_file:b.txt": "succeeded",
        "record:b": "succeeded",
        "publish:": "awaiting_review",
    }
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.kind == "openai-agents" and review.original_arguments == {"version": "1.0"}
    assert executions(task["id"]) == ["write_file a.txt", "write_file b.txt", "record b"]

    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    assert run_task(task["id"]) == "succeeded"
    done = task_api.get(task["id"])
    assert done["result"] == "done: published 1.0"
    assert calls(task["id"])["publish:"] == "succeeded"
    assert executions(task["id"])[-1] == "publish 1.0"
    events = list(Task.objects.get(id=task["id"]).events.values_list("type", flat=True))
    assert events.count("model_decision") == 4
    # The timeline names the model as the SDK calls it (a Model object by its class), never
    # by a Python repr.
    decision = Task.objects.get(id=task["id"]).events.filter(type="model_decision").first()
    assert decision.payload["model"] == "CountingModel"
    # Each turn's RunState is in a checkpoint (the model's response, before its tools ran).
    head = checkpoint_decode(Checkpoint.objects.filter(task_id=task["id"]).last())
    assert head.state.sdk["kind"] == "openai-agents" and head.state.sdk["run_state"]


def test_an_edited_approval_runs_the_tool_with_the_edited_arguments(task_api, api_client, operator):
    task = task_api.create(agent_spec("writer"))
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])
    response = api_client(operator).decide(
        review.id, decision="approve", arguments={"version": "2.0"}
    )
    assert response.status_code == 200, response.content
    assert run_task(task["id"]) == "succeeded"
    assert task_api.get(task["id"])["result"] == "done: published 2.0"
    assert executions(task["id"])[-1] == "publish 2.0"


def test_a_rejection_reaches_the_agent_with_the_comment(task_api, api_client, operator):
    task = task_api.create(agent_spec("writer"))
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])
    body = {"decision": "reject", "comment": "freeze week"}
    assert api_client(operator).decide(review.id, **body).status_code == 200
    assert run_task(task["id"]) == "succeeded"
    assert "freeze week" in task_api.get(task["id"])["result"]
    assert calls(task["id"])["publish:"] == "rejected"
    assert "publish 1.0" not in executions(task["id"])


def test_harness_rules_review_and_deny_the_sdk_tools(task_api, harness_yaml):
    harness_yaml(
        CONFIG
        + "review_rules:\n"
        + "  - {name: no-b, tool: write_file, path_glob: 'b.txt', action: deny}\n"
        + "  - {name: rec, tool: record, action: review}\n"
    )
    task = task_api.create(agent_spec("writer"))
    assert run_task(task["id"]) == "paused"
    assert calls(task["id"]) == {
        "write_file:a.txt": "succeeded",
        "write_file:b.txt": "denied",
        "record:b": "awaiting_review",
    }
    assert ReviewRequest.objects.get(task_id=task["id"]).tool == "record"


def test_a_guardrail_tripwire_fails_the_task_clearly(task_api):
    task = task_api.create(agent_spec("guarded", input="my password is hunter2"))
    assert run_task(task["id"]) == "failed"
    row = Task.objects.get(id=task["id"])
    assert row.error_class == "guardrail_tripwire"
    assert "input guardrail 'no_secrets' tripped" in row.error_message
    assert '"matched": "password"' in row.error_message
    assert row.events.get(type="guardrail_tripped").payload["guardrail"] == "no_secrets"


def test_a_handoff_shows_on_the_timeline(task_api):
    task = task_api.create(agent_spec("triage"))
    assert run_task(task["id"]) == "succeeded"
    row = Task.objects.get(id=task["id"])
    handoff = row.events.get(type="agent_handoff")
    assert handoff.payload == {"from_agent": "triage", "to_agent": "writer"}
    assert row.result == "done: wrote a.txt"
    assert (row.workspace_path / "a.txt").read_text() == "one\n"


def test_rollback_restores_the_workspace_and_the_sdk_state(task_api, api_client, operator):
    task = task_api.create(agent_spec("writer"))
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])
    api_client(operator).decide(review.id, decision="approve")
    assert run_task(task["id"]) == "succeeded"
    row = Task.objects.get(id=task["id"])
    assert sorted(p.name for p in row.workspace_path.iterdir()) == ["a.txt", "b.txt"]

    # The checkpoint of turn 2's model response: a.txt written, b.txt not yet.
    target = next(
        c
        for c in Checkpoint.objects.filter(task_id=task["id"], trigger="after_model")
        if c.step_index == 2
    )
    checkpoint_rollback(
        task_id=task["id"], checkpoint_id=target.id, user=operator, reason="redo b", resume=True
    )
    assert sorted(p.name for p in row.workspace_path.iterdir()) == ["a.txt"]
    model_turns = row.events.filter(type="model_decision").count()

    assert run_task(task["id"]) == "paused"  # publish asks again on the new branch
    review = ReviewRequest.objects.filter(task_id=task["id"], status="pending").get()
    api_client(operator).decide(review.id, decision="approve")
    assert run_task(task["id"]) == "succeeded"
    assert sorted(p.name for p in row.workspace_path.iterdir()) == ["a.txt", "b.txt"]
    # Turn 2 came from the restored RunState: the model answered turns 3 and 4 only, and
    # a.txt was not written again.
    assert row.events.filter(type="model_decision").count() == model_turns + 2
    assert executions(task["id"]).count("write_file a.txt") == 1
    assert executions(task["id"]).count("write_file b.txt") == 2


def test_the_bundled_example_runs(task_api, api_client, operator):
    task = task_api.create(
        {
            "title": "release",
            "goal": "release",
            "agent": {"kind": "openai-agents", "name": "release_writer", "input": "1.5.0"},
        }
    )
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.tool == "publish"
    api_client(operator).decide(review.id, decision="approve")
    assert run_task(task["id"]) == "succeeded"
    row = Task.objects.get(id=task["id"])
    assert row.result == "done: published 1.5.0 to #releases"
    assert (row.workspace_path / "NOTES.md").read_text().startswith("# 1.5.0")


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_hosted_mcp_approval_request_is_reviewed(task_api, api_client, operator, decision):
    task = task_api.create(agent_spec("hosted"))
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.tool == "gh__delete_repo" and review.original_arguments == {"repo": "old"}
    assert api_client(operator).decide(review.id, decision=decision).status_code == 200
    assert run_task(task["id"]) == "succeeded"
    approved = decision == "approve"
    assert task_api.get(task["id"])["result"] == f"approve={approved}"
    row = ToolCall.objects.get(task_id=task["id"])
    assert row.status == ("succeeded" if approved else "rejected")


def test_the_task_page_shows_the_agent_run(task_api, operator, client):
    task = task_api.create(agent_spec("triage"))
    assert run_task(task["id"]) == "succeeded"
    client.force_login(operator)
    for tab in ("", "?tab=checkpoints", "?tab=calls"):
        response = client.get(f"/tasks/{task['id']}/{tab}")
        assert response.status_code == 200, (tab, response.content[:300])
    events = task_api.client.get(f"/api/v1/tasks/{task['id']}/events").json()
    items = events["items"] if isinstance(events, dict) else events
    assert "agent_handoff" in {e["type"] for e in items}


def test_retry_after_a_failed_model_call_replays_the_executed_tool(task_api, operator):
    task = task_api.create(agent_spec("flaky_writer"))
    assert run_task(task["id"]) == "failed"
    row = Task.objects.get(id=task["id"])
    assert row.error_class == "agent_error" and "model endpoint down" in row.error_message
    assert executions(task["id"]) == ["record one"]

    task_retry(task_id=task["id"], user=operator, reason="endpoint is back")
    assert run_task(task["id"]) == "succeeded"
    row.refresh_from_db()
    assert row.result == "done: recorded two"
    # `record one` ran once: the retried run replayed it from the ledger.
    assert executions(task["id"]) == ["record one", "record two"]
    assert row.events.filter(type="tool_replayed").count() == 1


def test_mcp_server_tools_are_reviewed_by_their_annotations(
    task_api, api_client, operator, harness_yaml
):
    harness_yaml(
        CONFIG + "review_rules:\n  - {name: destructive, risk: destructive, action: review}\n"
    )
    # The server runs in the task's sandbox: the notes are the workspace's.
    task = task_api.create(
        {**agent_spec("notes_keeper"), "workspace": {"files": {"notes/old.txt": "old\n"}}}
    )
    notes = Path(Task.objects.get(id=task["id"]).workspace_path) / "notes"
    assert run_task(task["id"]) == "paused"
    # list_notes (readOnlyHint) ran without review; delete_note (destructiveHint) waits.
    assert calls(task["id"]) == {"list_notes:": "succeeded", "delete_note:": "awaiting_review"}
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.tool == "delete_note"
    assert review.matched_rules[0]["name"] == "destructive"
    assert (notes / "old.txt").exists()
    api_client(operator).decide(review.id, decision="approve")
    assert run_task(task["id"]) == "succeeded"
    assert not (notes / "old.txt").exists()
    assert ToolCall.objects.get(task_id=task["id"], tool="delete_note").risk == "destructive"


def test_an_approval_that_no_longer_holds_reopens_before_the_tool_runs(
    task_api, api_client, operator, harness_yaml
):
    task = task_api.create(agent_spec("writer"))
    run_task(task["id"])
    first = ReviewRequest.objects.get(task_id=task["id"])
    assert api_client(operator).decide(first.id, decision="approve").status_code == 200
    # Meanwhile the rules changed: publishing now needs two approvals.
    rule = "  - {name: two-for-publish, tool: publish, action: review, approvals_required: 2}\n"
    harness_yaml(CONFIG + "review_rules:\n" + rule)

    assert run_task(task["id"]) == "paused"
    reopened = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert reopened.reopened_from_id == first.id
    assert any("2 approvals" in change for change in reopened.changes)
    assert calls(task["id"])["publish:"] == "awaiting_review"
    assert "publish 1.0" not in executions(task["id"])


def test_a_remote_server_the_operator_allows_is_connected_from_the_worker(task_api):
    """`remote: true` in the agent's entry: the worker connects it (here nothing listens, so
    the task fails saying the server did not start, not that it was refused)."""
    task = task_api.create(agent_spec("remote_allowed", key="read x"))
    assert run_task(task["id"]) == "failed"
    row = Task.objects.get(id=task["id"])
    assert row.error_class == "mcp_server_unavailable"
    assert "'somewhere-remote'" in row.error_message
