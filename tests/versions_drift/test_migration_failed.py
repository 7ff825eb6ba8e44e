"""A migration chosen on a `version_drift` review that fails in the worker (issue #43): the task
does not fail; the review is reopened saying why (the migration's error, audited), and the
person chooses again: `continue` with an edit runs the call once. Run in this process."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import AuditEntry, Task, ToolCall
from tests.factories import scripted_task
from tests.versions_drift.conftest import runs

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failed_migration_reopens_the_review_and_continue_runs_the_call_once(
    durable_settings, tool_module, operator, api_client
):
    task = scripted_task(
        [{"call": tool_module.tool, "args": {"title": "API down"}}, {"final": "filed"}],
        [tool_module.tool],
        user=operator,
        enqueue=True,
    )
    assert run_task(task.id) == "paused"
    old = ReviewRequest.objects.get(task=task)
    client = api_client(operator)
    assert client.decide(old.id, decision="approve").status_code == 200
    # The deploy: the worker (this process) runs the tool whose model requires a priority.
    tool_module.write(extra="    priority: int")
    tool_module.deploy_here()
    assert run_task(task.id) == "paused"
    drift_review = ReviewRequest.objects.get(task=task, kind="version_drift")

    response = client.decide(drift_review.id, decision="migrate", migration="broken")
    assert response.status_code == 200, response.content
    assert run_task(task.id) == "paused"

    assert Task.objects.get(pk=task.pk).status == "waiting_review"
    reopened = ReviewRequest.objects.get(task=task, kind="version_drift", status="pending")
    assert reopened.reopened_from_id == drift_review.id
    error = "migration broken failed: RuntimeError: no priority table in this deploy"
    assert reopened.changes == [error]
    assert reopened.drift["migration_error"] == error
    assert reopened.drift["argument_errors"][0]["field"] == "arguments.priority"
    shown = client.get(f"/api/v1/reviews/{reopened.id}").json()
    assert shown["changes"] == [error]
    audit = AuditEntry.objects.get(task_id=task.id, action="review_reopened")
    assert audit.before["review"] == drift_review.id and audit.reason == error
    assert runs(task) == []

    edit = {"title": "API down", "priority": 2}
    response = client.decide(
        reopened.id,
        decision="continue",
        arguments_hash=canonical_hash(reopened.arguments),
        arguments=edit,
    )
    assert response.status_code == 200, response.content
    assert run_task(task.id) == "succeeded"
    assert runs(task) == [edit]
    assert ToolCall.objects.get(pk=reopened.tool_call_id).attempts == 1
