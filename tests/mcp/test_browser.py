"""A destructive MCP tool pauses for review; an operator reads the server, tool, annotations and
schema check on the review page in headless Chromium, approves, and the call runs once."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from tasks.models import ToolCall
from tests.conftest import BROWSER, wait_for
from tests.factories import enqueued_task

from .conftest import wait_status

pytestmark = [*BROWSER, pytest.mark.integration]


def test_destructive_tool_is_approved_in_the_browser_and_runs_once(
    live_server, fleet, mcp_http, open_page, operator, api_client
):
    fleet.worker()
    task = enqueued_task(
        [{"call": "remote__purge", "args": {"key": "pg-1"}}, {"final": "purged"}],
        ["remote__*"],
        title="purge a record",
    )
    wait_status(task.id, "waiting_review")
    assert not [c for c in mcp_http.calls("purge") if c["args"]["key"] == "pg-1"]

    # A loaded CI machine can take a while to answer the approval POST.
    page = open_page(operator, "/reviews/", timeout_ms=45_000)
    page.click("[data-testid=review-inbox] a:has-text('remote__purge')")

    assert page.inner_text("[data-testid=mcp-server]") == "remote"
    assert "Delete a record for good." in page.inner_text("[data-testid=mcp-description]")
    hints = page.inner_text("[data-testid=mcp-annotations]")
    assert "destructiveHint: true" in hints and "idempotentHint: true" in hints
    assert "openWorldHint: true (not declared; MCP default)" in hints
    assert "match the tool's inputSchema" in page.inner_text("[data-testid=mcp-schema-check]")

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=approve]")
    page.wait_for_url(f"{live_server.url}/reviews/")  # no other review waits

    wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task, tool="remote__purge")
    assert call.status == "succeeded" and call.result == {"purged": "pg-1"}
    purged = [c for c in mcp_http.calls("purge") if c["args"]["key"] == "pg-1"]
    assert len(purged) == 1 and purged[0]["key"] == f"{task.id}:{call.call_id}"

    def shown_on_the_timeline() -> bool:
        page.goto(f"{live_server.url}/tasks/{task.pk}/")
        return "remote__purge" in page.content()

    wait_for(shown_on_the_timeline, 30, interval=0.3, message="the call on the task page")

    # The resumed run used the tools recorded at the start; it did not list them again.
    assert task.events.filter(type="mcp_tools_listed").count() == 1
    # The purge happened on the server: a rollback past it says it cannot be undone.
    start = Checkpoint.objects.get(task=task, trigger="task_start")
    preview = api_client(operator).get(
        f"/api/v1/tasks/{task.id}/rollback/preview", {"checkpoint_id": str(start.id)}
    )
    assert [c["tool"] for c in preview.json()["irreversible"]] == ["remote__purge"]
