"""A deploy under a paused SDK agent task (issue #43 item 2, the SDK half), with real rqworkers:
a Pydantic AI or OpenAI Agents SDK agent's call waits for review; the agent's module changes
(its instructions, or its tool's argument list gains a required field); workers restart; the
operator approves the old review. The call does not run: a `version_drift` review names what
changed (the agent's definition, the tool's field); `continue` runs it once."""

from __future__ import annotations

import json

import pytest

from review.models import DecisionReceipt
from tasks.canonical import canonical_hash
from tasks.models import Task, TaskEvent, ToolCall
from tests.conftest import wait_for
from tests.factories import spec_task
from tests.versions_drift.conftest import DRIFT_CONFIG, pending, restart, runs
from tests.versions_drift.sdk_agents import agent_module, sdk_spec  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SDKS = ["pydantic-ai", "openai-agents"]


@pytest.fixture
def harness_config_text(agent_module) -> str:  # noqa: F811  (the fixture imported above)
    return agent_module.config(DRIFT_CONFIG)


def paused_then_deployed(fleet, module, operator, api_client, kind, **change):
    """The task paused for review of file_ticket under the old agent, the new agent deployed,
    the old review approved: the worker opens a version_drift review instead of running it."""
    fleet.worker(1)
    task = spec_task(sdk_spec(kind), user=operator, enqueue=True)
    old = pending(task, kind)
    assert old.tool == "file_ticket" and old.arguments == {"title": "API down"}
    restart(fleet, lambda: module.write(**change))
    approved = api_client(operator).decide(old.id, decision="approve")
    assert approved.status_code == 200, approved.content
    review = pending(task, "version_drift")
    assert review.tool_call_id == old.tool_call_id
    assert Task.objects.get(pk=task.pk).status == "waiting_review"
    assert runs(task) == []
    assert ToolCall.objects.get(pk=old.tool_call_id).attempts == 0
    return task, review


def finished(task: Task) -> Task:
    wait_for(
        lambda: (
            Task.objects.values_list("status", flat=True).get(pk=task.pk)
            in ("succeeded", "failed", "canceled")
        ),
        90,
        message="the task to end",
    )
    task.refresh_from_db()
    return task


@pytest.mark.parametrize("kind", SDKS)
def test_a_tool_field_added_stops_the_approved_call_and_continue_with_the_field_runs_it_once(
    kind,
    fleet,
    agent_module,  # noqa: F811
    operator,
    second_operator,
    api_client,
):
    task, review = paused_then_deployed(
        fleet, agent_module, operator, api_client, kind, params=", priority: int"
    )
    body = api_client(operator).get(f"/api/v1/reviews/{review.id}").json()
    assert body["kind"] == "version_drift"
    drift = body["drift"]
    assert drift["touches_next"] and drift["arguments_valid"] is False
    assert "the pending call's tool file_ticket changed its argument schema" in drift["touches"]
    assert "the agent's definition changed" in drift["touches"]
    (tool,) = [c for c in drift["changes"] if c["kind"] == "tool"]
    assert tool["name"] == "file_ticket" and tool["required"] == ["priority"]
    assert [e["field"] for e in drift["argument_errors"]] == ["arguments.priority"]
    (agent,) = [c for c in drift["changes"] if c["kind"] == "agent"]
    assert any("file_ticket" in part for part in agent["parts"])
    # Recorded for the task's events too, naming what changed.
    (event,) = TaskEvent.objects.filter(task=task, type="version_drift")
    assert any("file_ticket" in line for line in event.payload["changes"])

    client = api_client(second_operator)
    shown = body["arguments_hash"]
    refused = client.decide(review.id, decision="continue", arguments_hash=shown)
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "arguments.priority"
    assert client.decide(review.id, decision="migrate", migration="x").status_code == 409
    response = client.decide(
        review.id,
        decision="continue",
        arguments_hash=shown,
        arguments={"title": "API down", "priority": 1},
    )
    assert response.status_code == 200, response.content
    task = finished(task)
    assert task.status == "succeeded", task.error_message
    assert runs(task) == [{"title": "API down", "priority": 1}]
    assert ToolCall.objects.get(pk=review.tool_call_id).attempts == 1
    receipt = DecisionReceipt.objects.filter(review_id=review.id).get()
    assert receipt.decision == "continue" and receipt.subject["choice"]["edited"] is True


@pytest.mark.parametrize("kind", SDKS)
def test_changed_instructions_stop_the_approved_call_and_continue_runs_it_once(
    kind,
    fleet,
    agent_module,  # noqa: F811
    operator,
    api_client,
):
    task, review = paused_then_deployed(
        fleet, agent_module, operator, api_client, kind, instructions="File it twice, loudly."
    )
    drift = review.drift
    assert drift["touches"] == ["the agent's definition changed"]
    assert drift["arguments_valid"] is None  # the tool's schema is as it was
    (agent,) = [c for c in drift["changes"] if c["kind"] == "agent"]
    assert [p for p in agent["parts"] if "instructions" in p]
    assert "File it twice, loudly." in json.dumps(agent["new_body"])
    assert "File it twice, loudly." not in json.dumps(agent["old_body"])
    assert [c["kind"] for c in drift["changes"]] == ["agent"]

    response = api_client(operator).decide(
        review.id, decision="continue", arguments_hash=canonical_hash(review.arguments)
    )
    assert response.status_code == 200, response.content
    task = finished(task)
    assert task.status == "succeeded", task.error_message
    assert runs(task) == [{"title": "API down"}]
    assert ToolCall.objects.get(pk=review.tool_call_id).attempts == 1
