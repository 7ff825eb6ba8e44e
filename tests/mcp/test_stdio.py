"""A stdio MCP server, started per task run inside the task's sandbox with the workspace as its
working directory, against real workers: its files are captured and rolled back, a server that
exits is restarted for the next call, and one that dies mid-call is never blindly re-run."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from agent.tools.quota import disk_usage
from checkpoints.models import Checkpoint
from review.models import ReviewRequest
from review.services import review_resolve_unknown_outcome
from tasks.models import ToolCall
from tests.factories import enqueued_task

from .conftest import BASE_CONFIG, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STDIO_CONFIG = """
mcp_servers:
  local:
    command: ["{python}", "-m", "tests.mcp.server", "stdio"]
    env: {PYTHONPATH: "{harness}"}
    ro_paths: ["{harness}/tests/mcp"]
"""


@pytest.fixture
def harness_config_text() -> str:
    # A 2 MiB workspace quota for the server's sandbox.
    return BASE_CONFIG + STDIO_CONFIG + "sandbox: {disk_mb: 2}\n"


def test_file_written_by_a_stdio_server_is_in_the_workspace_and_rolled_back(
    fleet, api_client, operator
):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "local__write_text", "args": {"path": "report.txt", "content": "draft"}},
            {"final": "written"},
        ],
        ["local__*"],
        workspace={"files": {"keep.txt": "kept"}},
    )
    task = wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task, tool="local__write_text")
    assert call.status == "succeeded" and call.risk == "write"
    assert (task.workspace_path / "report.txt").read_text() == "draft"

    before = Checkpoint.objects.get(task=task, trigger="before_write_operation")
    preview = api_client(operator).get(
        f"/api/v1/tasks/{task.id}/rollback/preview", {"checkpoint_id": str(before.id)}
    )
    # The server declared openWorldHint: false: its effects are the workspace's, undoable.
    assert preview.json()["irreversible"] == []
    response = api_client(operator).post(
        f"/api/v1/tasks/{task.id}/rollback",
        {"checkpoint_id": str(before.id), "resume": False, "reason": "undo the report"},
    )
    assert response.status_code == 200, response.content
    assert not (task.workspace_path / "report.txt").exists()
    assert (task.workspace_path / "keep.txt").read_text() == "kept"


def test_stdio_server_that_exited_is_restarted_for_the_next_call(fleet):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "local__exit_soon", "args": {}},
            # The model thinks for a second: the server has exited by the next call.
            {"call": "local__lookup", "args": {"key": "again"}, "delay_s": 1},
            {"final": "done"},
        ],
        ["local__*"],
    )
    task = wait_status(task.id, "succeeded")
    calls = {c.tool: c for c in ToolCall.objects.filter(task=task)}
    assert calls["local__lookup"].status == "succeeded" and calls["local__lookup"].attempts == 1
    assert calls["local__lookup"].result["boot"] != calls["local__exit_soon"].result["boot"]
    restarted = task.events.get(type="mcp_server_error").payload
    assert restarted["server"] == "local" and "restarted" in restarted["message"]


def test_server_that_crashes_mid_call_escalates_and_the_task_goes_on(fleet):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "local__crash", "args": {}},
            {"call": "local__lookup", "args": {"key": "after"}},
            {"final": "recovered"},
        ],
        ["local__*"],
    )
    wait_status(task.id, "waiting_review")
    crash = ToolCall.objects.get(task=task, tool="local__crash")
    assert crash.status == "unknown_outcome" and crash.attempts == 1
    assert "lost its connection" in crash.error_message
    review = ReviewRequest.objects.get(task=task)
    assert review.kind == "unknown_outcome"

    operator = get_user_model().objects.create_superuser("op", password="x")
    review_resolve_unknown_outcome(review_id=review.id, user=operator, decision="mark_done")
    task = wait_status(task.id, "succeeded")
    assert ToolCall.objects.get(task=task, tool="local__lookup").result["value"] == "AFTER"
    assert ToolCall.objects.get(task=task, tool="local__crash").attempts == 1


def test_calls_of_a_stdio_server_together_keep_to_the_workspace_quota(fleet):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "local__fill", "args": {"path": "first", "mib": 1}},
            {"call": "local__fill", "args": {"path": "second", "mib": 1}},
            {"final": "done"},
        ],
        ["local__*"],
    )
    task = wait_status(task.id, "succeeded", timeout=120)
    first, second = ToolCall.objects.filter(task=task, tool="local__fill").order_by("id")
    # Each call is under the 2 MiB quota; the second gets only what the first left.
    assert first.status == "succeeded"
    assert second.status == "failed"
    assert second.result["result"] == {"limits_hit": ["disk"]}
    assert "File too large" in second.error_message
    assert (task.workspace_path / "first.0").stat().st_size == 1024**2
    assert disk_usage(task.workspace_path) <= 2 * 1024**2


def test_stdio_server_past_its_workspace_quota_is_stopped_and_told(fleet):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "local__fill", "args": {"path": "big.bin", "mib": 40}},
            {"call": "local__lookup", "args": {"key": "small"}},
            {"final": "done"},
        ],
        ["local__*"],
    )
    task = wait_status(task.id, "succeeded", timeout=120)
    fill = ToolCall.objects.get(task=task, tool="local__fill")
    assert fill.status == "failed"
    assert "took the workspace to" in fill.error_message
    assert "past its quota of 2.0 MiB" in fill.error_message
    assert fill.result["result"] == {"limits_hit": ["disk"]}
    # Stopped long before it wrote 40 MiB, and what it wrote was taken back; the next call
    # ran on a fresh server.
    assert list(task.workspace_path.glob("big.bin.*")) == []
    assert disk_usage(task.workspace_path) <= 2 * 1024**2
    assert ToolCall.objects.get(task=task, tool="local__lookup").status == "succeeded"
