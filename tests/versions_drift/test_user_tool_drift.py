"""A deploy under a paused task (issue #43, Done when 1 and 3), with real rqworkers: a user
tool (HARNESS_TOOL_MODULES) whose argument model gains a required field while its call waits
for review. The approval given under the old code does not run the call; a `version_drift`
review names the field; `continue` with an edit that supplies it runs the call once; a
registered migration applied through `migrate` shows in the events and the checkpoint diff."""

from __future__ import annotations

import json

import pytest

from checkpoints.models import Checkpoint
from review.models import DecisionReceipt, ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task, TaskEvent, ToolCall
from tests.conftest import wait_for
from tests.factories import scripted_task
from tests.versions_drift.conftest import pending, restart, runs

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

REQUIRED_PRIORITY = "    priority: int"


def paused_then_deployed(fleet, tool_module, operator, api_client) -> tuple[Task, ReviewRequest]:
    """The task paused for review under the old tool, the new tool deployed, the old review
    approved: the worker opens a version_drift review instead of running the call."""
    fleet.worker(1)
    task = scripted_task(
        [{"call": tool_module.tool, "args": {"title": "API down"}}, {"final": "filed"}],
        [tool_module.tool],
        user=operator,
        enqueue=True,
    )
    old = pending(task, "policy")
    restart(fleet, lambda: tool_module.write(extra=REQUIRED_PRIORITY))
    approved = api_client(operator).decide(old.id, decision="approve")
    assert approved.status_code == 200, approved.content
    return task, pending(task, "version_drift")


def test_an_approval_under_the_old_schema_does_not_run_the_call_and_continue_with_an_edit_does(
    fleet, tool_module, operator, second_operator, api_client
):
    task, review = paused_then_deployed(fleet, tool_module, operator, api_client)

    assert runs(task) == []
    assert ToolCall.objects.get(pk=review.tool_call_id).attempts == 0
    body = api_client(operator).get(f"/api/v1/reviews/{review.id}").json()
    assert body["kind"] == "version_drift"
    drift = body["drift"]
    assert drift["touches_next"] and drift["arguments_valid"] is False
    (change,) = [c for c in drift["changes"] if c["kind"] == "tool"]
    assert change["name"] == tool_module.tool and change["required"] == ["priority"]
    assert "priority" not in change["old_body"]["properties"]
    assert "priority" in change["new_body"]["properties"]
    assert drift["argument_errors"] == [
        {"field": "arguments.priority", "message": "Field required"}
    ]

    client = api_client(second_operator)
    shown = body["arguments_hash"]
    # Unchanged arguments no longer validate: continue needs the edit.
    refused = client.decide(review.id, decision="continue", arguments_hash=shown)
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "arguments.priority"
    # A plain approval of a version_drift review is refused too.
    assert client.decide(review.id, decision="approve", arguments_hash=shown).status_code == 422
    assert runs(task) == []

    response = client.decide(
        review.id,
        decision="continue",
        arguments_hash=shown,
        arguments={"title": "API down", "priority": 1},
        comment="priority 1: it is an outage",
    )
    assert response.status_code == 200, response.content
    assert wait_for(
        lambda: (
            Task.objects.values_list("status", flat=True).get(pk=task.pk) in ("succeeded", "failed")
        ),
        90,
    )
    task.refresh_from_db()
    assert task.status == "succeeded", task.error_message
    assert runs(task) == [{"title": "API down", "priority": 1}]
    assert ToolCall.objects.get(pk=review.tool_call_id).attempts == 1
    receipt = DecisionReceipt.objects.filter(review_id=review.id).get()
    assert receipt.decision == "continue" and receipt.subject["choice"]["edited"] is True


def test_migrate_applies_the_registered_migration_visible_in_events_and_checkpoint_diff(
    fleet, tool_module, operator, api_client
):
    task, review = paused_then_deployed(fleet, tool_module, operator, api_client)
    client = api_client(operator)

    unknown = client.decide(review.id, decision="migrate", migration="no-such")
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "migration"

    response = client.decide(review.id, decision="migrate", migration="add-priority")
    assert response.status_code == 200, response.content
    # The migrated call is a new call nobody approved: the policy pauses it again.
    again = pending(task, "policy")
    assert again.tool_call_id != review.tool_call_id
    assert again.arguments == {"title": "API down", "priority": 3}
    assert runs(task) == []

    (event,) = TaskEvent.objects.filter(task=task, type="version_migrated")
    assert event.payload["migration"] == "add-priority"
    assert event.payload["pending_before"][0]["arguments"] == {"title": "API down"}
    assert event.payload["pending_after"][0]["arguments"] == {"title": "API down", "priority": 3}
    migrated = Checkpoint.objects.get(task=task, trigger="migration")
    diff = client.get(
        f"/api/v1/tasks/{task.id}/checkpoints/diff",
        {"a": str(migrated.parent_id), "b": str(migrated.id)},
    )
    assert diff.status_code == 200, diff.content
    assert "priority" in json.dumps(diff.json())

    tool_module.deploy_here()
    approved = client.decide(again.id, decision="approve")
    assert approved.status_code == 200, approved.content
    wait_for(
        lambda: Task.objects.values_list("status", flat=True).get(pk=task.pk) == "succeeded", 90
    )
    assert runs(task) == [{"title": "API down", "priority": 3}]
    assert (
        canonical_hash(again.arguments)
        == ToolCall.objects.get(pk=again.tool_call_id).arguments_hash
    )
