"""An MCP server over streamable HTTP as a tool source, against real workers: annotations decide
review and retries, the call id reaches the server, errors go back to the model."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_decode
from review.models import ReviewRequest
from tasks.models import ToolCall
from tests.conftest import wait_for
from tests.factories import enqueued_task

from .conftest import UNSET, http_server_start, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_read_only_tool_runs_without_review_and_its_call_id_reaches_the_server(fleet, mcp_http):
    fleet.worker()
    task = enqueued_task(
        [{"call": "remote__lookup", "args": {"key": "ro-1"}}, {"final": "found"}],
        ["remote__*"],
    )
    task = wait_status(task.id, "succeeded")

    call = ToolCall.objects.get(task=task, tool="remote__lookup")
    assert call.status == "succeeded" and call.risk == "read"
    assert call.result["value"] == "RO-1"
    # The harness's idempotency key (task id and call id) travelled in the request's _meta.
    [seen] = [c for c in mcp_http.calls("lookup") if c["args"]["key"] == "ro-1"]
    assert seen["key"] == f"{task.id}:{call.call_id}"
    assert not ReviewRequest.objects.filter(task=task).exists()

    # The tools were listed once, at the start, and recorded in the first checkpoint.
    listed = task.events.get(type="mcp_tools_listed").payload
    assert listed["server"] == "remote" and listed["tool_count"] >= 6
    first = Checkpoint.objects.filter(task=task).order_by("seq").first()
    assert first.trigger == "task_start"
    recorded = {t.name for t in checkpoint_decode(first).state.mcp_tools}
    assert {"remote__lookup", "remote__purge", "remote__unmarked"} <= recorded


def test_unannotated_tool_is_reviewed_as_destructive(fleet, mcp_http):
    fleet.worker()
    task = enqueued_task(
        [{"call": "remote__unmarked", "args": {"key": "un-1"}}, {"final": "done"}],
        ["remote__unmarked"],
    )
    wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    assert review.tool == "remote__unmarked"
    assert [rule["name"] for rule in review.matched_rules] == ["destructive"]
    assert not [c for c in mcp_http.calls("unmarked") if c["args"]["key"] == "un-1"]


def test_is_error_result_goes_back_to_the_model(fleet, mcp_http):
    fleet.worker()
    task = enqueued_task(
        [{"call": "remote__refuse", "args": {"reason": "no such ticket"}}, {"final": "gave up"}],
        ["remote__refuse"],
    )
    task = wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task, tool="remote__refuse")
    assert call.status == "failed" and call.attempts == 1
    assert "refused: no such ticket" in call.result["observation"]


def test_schema_invalid_call_never_reaches_the_server(fleet, mcp_http):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "remote__lookup", "args": {"key": 42}},
            {"call": "remote__purge", "args": {"id": "x"}},
            {"final": "done"},
        ],
        ["remote__*"],
    )
    task = wait_status(task.id, "succeeded")
    calls = {c.tool: c for c in ToolCall.objects.filter(task=task)}
    assert calls["remote__lookup"].error_class == "invalid_arguments"
    assert "key: 42 is not of type 'string'" in calls["remote__lookup"].error_message
    # Invalid arguments are refused before policy: the destructive tool never asked a human.
    assert calls["remote__purge"].error_class == "invalid_arguments"
    assert not ReviewRequest.objects.filter(task=task).exists()
    assert not [c for c in mcp_http.calls() if c["args"].get("key") == 42]
    assert not mcp_http.calls("purge") or all(c["args"].get("key") for c in mcp_http.calls("purge"))


def test_idempotent_tool_is_retried_after_a_timeout_with_the_same_key(fleet, mcp_http):
    fleet.worker()
    task = enqueued_task(
        [{"call": "remote__sync", "args": {"key": "sy-1", "slow_times": 1}}, {"final": "synced"}],
        ["remote__sync"],
        budget={"tool_timeout_s": 2},
    )
    task = wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task, tool="remote__sync")
    assert call.status == "succeeded" and call.attempts == 2
    assert [a["error_class"] for a in call.attempt_log] == ["timeout", ""]
    seen = [c for c in mcp_http.calls("sync") if c["args"]["key"] == "sy-1"]
    assert len(seen) == 2 and seen[0]["key"] == seen[1]["key"] == f"{task.id}:{call.call_id}"


def test_non_idempotent_call_that_times_out_escalates_instead_of_failing(fleet, mcp_http):
    fleet.worker()
    hold = mcp_http.state / "hold"
    hold.touch()
    try:
        task = enqueued_task(
            [{"call": "remote__note", "args": {"text": "nt-1"}}, {"final": "noted"}],
            ["remote__note"],
            budget={"tool_timeout_s": 2},
        )
        task = wait_status(task.id, "waiting_review")
    finally:
        hold.unlink()
    call = ToolCall.objects.get(task=task)
    # It reached the server and did not answer in time: it may have taken effect.
    assert call.status == "unknown_outcome" and "timed out" in call.error_message
    assert ReviewRequest.objects.get(task=task).kind == "unknown_outcome"
    assert len([c for c in mcp_http.calls("note") if c["args"]["text"] == "nt-1"]) == 1


def test_non_idempotent_call_escalates_after_its_worker_is_killed(fleet, mcp_http):
    fleet.worker(2)
    fleet.sweeper()
    hold = mcp_http.state / "hold"
    hold.touch()
    try:
        task = enqueued_task(
            [{"call": "remote__note", "args": {"text": "nk-1"}}, {"final": "noted"}],
            ["remote__note"],
        )
        wait_for(
            lambda: [c for c in mcp_http.calls("note") if c["args"]["text"] == "nk-1"],
            message="the note call to reach the server",
        )
        fleet.kill_worker_of(task.id)
        task = wait_status(task.id, "waiting_review")
    finally:
        hold.unlink()
    review = ReviewRequest.objects.get(task=task)
    assert review.kind == "unknown_outcome" and review.tool == "remote__note"
    assert ToolCall.objects.get(task=task).status == "unknown_outcome"
    assert len([c for c in mcp_http.calls("note") if c["args"]["text"] == "nk-1"]) == 1


def test_unreachable_server_fails_the_task_closed_and_ops_and_stats_show_servers(
    fleet, mcp_http, operator, client
):
    fleet.worker()
    ok = enqueued_task(
        [
            {"call": "remote__lookup", "args": {"key": "ops-1"}},
            {"call": "remote__refuse", "args": {"reason": "ops"}},
            {"final": "ok"},
        ],
        ["remote__*"],
    )
    down = enqueued_task([{"call": "down__anything", "args": {}}, {"final": "never"}], ["down__*"])
    locked = enqueued_task([{"final": "never"}], ["locked__lookup"])
    wait_status(ok.id, "succeeded")
    down = wait_status(down.id, "failed")
    assert down.error_class == "mcp_unavailable"
    assert "could not start MCP server 'down'" in down.error_message
    assert not ToolCall.objects.filter(task=down).exists()
    # A header whose variable is not set is not sent empty: the server is not contacted.
    locked = wait_status(locked.id, "failed")
    assert locked.error_class == "mcp_unavailable"
    assert f"environment variable {UNSET} (for header Authorization) is not set" in (
        locked.error_message
    )

    client.force_login(operator)
    page = client.get("/ops/").content.decode()
    assert 'data-server="remote"' in page and 'data-server="down"' in page
    # The fifteen usable tools of tests/mcp/server.py (`screen`'s pattern is not RE2's).
    assert 'data-testid="mcp-tools-remote">15<' in page
    assert "could not start MCP server" in page.split('data-testid="mcp-error-down"')[1][:400]

    stats = client.get("/api/v1/stats/failures", {"since": "1h"}).json()
    assert {"server": "remote", "tools": 2, "calls": 2, "failed": 1, "rate": 0.5} in stats[
        "by_mcp_server"
    ]
    assert 'data-server="remote"' in client.get("/stats/failures/").content.decode()


def test_server_not_up_yet_is_retried_until_it_answers(fleet, late_port, tmp_path):
    fleet.worker()
    task = enqueued_task(
        [{"call": "late__lookup", "args": {"key": "late-1"}}, {"final": "found"}],
        ["late__lookup"],
        # Three retries (the on_retryable_error trigger's cap), 5 s apart: time to start it.
        retry={"initial_s": 5, "factor": 1, "max_s": 5, "jitter": "none"},
    )
    wait_for(
        lambda: task.events.filter(type="retry_scheduled").exists(),
        message="the listing to be retried",
    )
    server = http_server_start(state=tmp_path, port=late_port)
    try:
        task = wait_status(task.id, "succeeded", timeout=120)
    finally:
        server.process.kill()
        server.process.wait(timeout=10)
    assert ToolCall.objects.get(task=task).result["value"] == "LATE-1"
    assert task.events.filter(type="mcp_tools_listed").count() == 1
    assert (
        "could not start MCP server 'late'"
        in (task.events.filter(type="mcp_server_error").first().payload["message"])
    )
