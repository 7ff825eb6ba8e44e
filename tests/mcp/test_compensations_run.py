"""A rollback runs an MCP server's compensation mapped in harness.yaml (issue #44): the
server's `close_issue` undoes its `create_issue`, called once through the server with the
arguments the mapping filled in, under a key derived from the original call's."""

from __future__ import annotations

import pytest

from checkpoints import recovery
from review.models import ReviewRequest
from tasks.models import ToolCall
from tests.checkpoints.conftest import checkpoint_after_step
from tests.conftest import ApiClient, wait_for
from tests.durable.conftest import task_status
from tests.factories import enqueued_task, run_in_process, scripted_task
from tests.mcp.conftest import BASE_CONFIG, wait_status
from tests.mcp.test_compensations import CONFIG

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mapped(harness_yaml, mcp_http, settings, harness_dirs):
    settings.HARNESS_BLOB_DIR = harness_dirs / "blobs"
    harness_yaml(CONFIG.format(url=mcp_http.url))


def test_rollback_closes_the_issue_through_the_server_once(mapped, mcp_http, operator):
    task = scripted_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
            {"call": "remote__create_issue", "args": {"project": "ops", "title": "API down"}},
            {"call": "write_file", "args": {"path": "a.txt", "content": "2"}},
            {"final": "done"},
        ],
        ["write_file", "remote__create_issue", "remote__close_issue"],
    )
    assert run_in_process(task) == "succeeded", task.error_message
    created = ToolCall.objects.get(task=task, tool="remote__create_issue")
    issue = created.result["id"]

    recovery.checkpoint_rollback(
        task_id=task.id,
        checkpoint_id=checkpoint_after_step(task, 1).id,
        user=operator,
        reason="filed in the wrong project",
        resume=True,
    )
    assert run_in_process(task) == "succeeded", task.error_message

    undo = f"{created.call_id}~undo"
    (closed,) = [c for c in mcp_http.calls("close_issue") if c["args"]["project"] == "ops"]
    assert closed["args"] == {"project": "ops", "id": issue}
    assert closed["key"] == f"{task.id}:{undo}"
    row = ToolCall.objects.get(task=task, call_id=undo)
    assert (row.tool, row.status, row.arguments) == (
        "remote__close_issue",
        "succeeded",
        {"project": "ops", "id": issue},
    )
    aligned = task.events.get(type="context_aligned").payload
    assert any(issue in line for line in aligned["undone"]["compensated"])


@pytest.fixture
def harness_config_text(mcp_http) -> str:
    """External calls are reviewed (BASE_CONFIG), and `remote`'s create_issue is undone by its
    close_issue."""
    return BASE_CONFIG + CONFIG.format(url=mcp_http.url).split("review_rules: []\n", 1)[1]


def approve_until_done(api: ApiClient, task_id) -> list[str]:
    """Approve every review the task waits for until it succeeds; -> the reviewed call_ids."""
    reviewed = []
    while wait_status(task_id, "waiting_review", "succeeded", timeout=60).status != "succeeded":
        review = ReviewRequest.objects.get(task_id=task_id, status="pending")
        reviewed.append(review.tool_call.call_id)
        response = api.decide(review.id, decision="approve")
        assert response.status_code == 200, response.content
        wait_for(lambda: task_status(task_id) != "waiting_review", message="the approval")
    return reviewed


@pytest.mark.integration
def test_on_workers_both_issues_are_closed_newest_first_each_reviewed_and_once(
    fleet, mcp_http, operator
):
    fleet.worker()
    api = ApiClient(operator)
    task = enqueued_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
            {"call": "remote__create_issue", "args": {"project": "rb", "title": "first"}},
            {"call": "remote__create_issue", "args": {"project": "rb", "title": "second"}},
            {"final": "done"},
        ],
        ["write_file", "remote__create_issue", "remote__close_issue"],
    )
    approve_until_done(api, task.id)
    first, second = ToolCall.objects.filter(task=task, tool="remote__create_issue").order_by("id")
    target = task.checkpoints.get(trigger="after_step", step_index=1, superseded=False)
    response = api.post(
        f"/api/v1/tasks/{task.id}/rollback",
        {"checkpoint_id": str(target.id), "resume": True, "reason": "wrong project"},
    )
    assert response.status_code == 200, response.content

    reviewed = approve_until_done(api, task.id)
    undo_first, undo_second = f"{first.call_id}~undo", f"{second.call_id}~undo"
    # Each compensation of a reviewed call paused for review like any call, newest first.
    assert reviewed[:2] == [undo_second, undo_first]
    closed = [c for c in mcp_http.calls("close_issue") if c["args"]["project"] == "rb"]
    assert [(c["args"]["id"], c["key"]) for c in closed] == [
        (second.result["id"], f"{task.id}:{undo_second}"),
        (first.result["id"], f"{task.id}:{undo_first}"),
    ]
