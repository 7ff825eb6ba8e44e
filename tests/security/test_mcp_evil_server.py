"""A malicious stdio MCP server (tests/security/mcp_evil_server.py), started from harness.yaml
by real workers: it cannot leave its sandbox, flooding its output does not hurt the worker, a
call it never answers ends at the tool timeout with the server killed, and huge or deeply
nested answers reach the model and the pages as bounded, compact text."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from tasks.models import ToolCall
from tests.conftest import ApiClient, page_client
from tests.factories import enqueued_task
from tests.mcp.conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TOOL_S = 4
CONFIG = f"""
retry: {{initial_s: 0.2, factor: 2, max_s: 1, jitter: none, max_attempts: 1}}
timeouts: {{session_s: 600, turn_s: 60, tool_s: {TOOL_S}}}
mcp_servers:
  evil:
    command: ["{{python}}", "{{harness}}/tests/security/mcp_evil_server.py"]
    ro_paths: ["{{harness}}/tests/security"]
"""
# What the harness may keep of one result, with room for the JSON around it.
RESULT_BOUND = 80 * 1024


@pytest.fixture
def harness_config_text() -> str:
    return CONFIG


def evil(tool: str, **args) -> dict:
    return {"call": f"evil__{tool}", "args": args}


def calls(task) -> dict[str, ToolCall]:
    return {c.call_id: c for c in ToolCall.objects.filter(task=task)}


def stored_size(call: ToolCall) -> int:
    return len(json.dumps(call.result)) + len(call.error_message)


def test_the_server_cannot_reach_the_harness_other_tasks_processes_or_loopback(fleet):
    fleet.worker()
    other = settings.HARNESS_WORKSPACE_ROOT / "another-task"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("another task's secret")
    targets = [
        str(settings.BASE_DIR / "manage.py"),
        str(settings.BASE_DIR / ".data"),
        str(settings.HARNESS_CONFIG_FILE),
        str(settings.HARNESS_WORKSPACE_ROOT),
        str(other / "secret.txt"),
    ]
    task = enqueued_task(
        [evil("escape", paths=targets, ports=[5432, 6380, 6379]), {"final": "tried"}],
        ["evil__*"],
    )
    task = wait_status(task.id, "succeeded")
    (call,) = calls(task).values()
    assert call.status == "succeeded", call.error_message
    assert call.result["reached"] == []


def test_flooding_huge_and_nested_answers_are_bounded_and_the_pages_render(fleet, operator):
    fleet.worker()
    task = enqueued_task(
        [
            evil("flood", mib=64),
            evil("huge", mib=8),
            evil("huge", mib=20),
            evil("nested", depth=100_000),
            evil("nested", depth=30_000, as_text=True),
            evil("nested", depth=150),
            {"final": "survived"},
        ],
        ["evil__*"],
    )
    task = wait_status(task.id, "succeeded", timeout=120)
    flood, huge, too_huge, deep, deep_text, nested = (c for _, c in sorted(calls(task).items()))
    assert flood.status == "succeeded" and flood.result == {"text": "flooded"}
    for call in (huge, too_huge, deep, deep_text, nested):
        assert stored_size(call) < RESULT_BOUND, (call.tool, stored_size(call))
    assert huge.status == "succeeded" and "truncated" in huge.result["text"]
    for call in (too_huge, deep):
        # More than a message may carry, or deeper than a parser goes: a compact failure.
        assert call.status in ("failed", "timed_out") and len(call.error_message) < 1000
    client = page_client(operator)
    assert client.get(f"/tasks/{task.id}/").status_code == 200
    assert client.get(f"/tasks/{task.id}/?tab=timeline").status_code == 200
    assert ApiClient(operator).get(f"/api/v1/tasks/{task.id}").status_code == 200


def test_a_call_the_server_never_answers_ends_at_the_timeout_and_the_server_dies(fleet):
    fleet.worker()
    task = enqueued_task(
        [evil("hang"), {**evil("heartbeat_age"), "delay_s": 1}, {"final": "moved on"}],
        ["evil__*"],
    )
    task = wait_status(task.id, "succeeded", "failed", timeout=90)
    hang, age = (c for _, c in sorted(calls(task).items()))
    assert hang.status == "timed_out" and hang.error_class == "timeout"
    assert (hang.finished_at - hang.started_at).total_seconds() < TOOL_S + 3
    # The next call's server (a new one) finds the hung one's heartbeat stopped when it
    # timed out: that process was killed, not left running behind the run.
    assert age.status == "succeeded"
    assert float(age.result["text"]) > 0.8
