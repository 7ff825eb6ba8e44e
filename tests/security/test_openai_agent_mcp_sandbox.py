"""An OpenAI Agents SDK agent's own local MCP servers (`Agent(mcp_servers=[MCPServerStdio(...)])`)
are tool processes like harness.yaml's stdio servers (THREATS.md): a worker starts them in the
task's sandbox, so they see the workspace and what harness.yaml grants them, not the machine.
A server the sandbox cannot hold (a working directory outside the workspace, a remote server
the operator has not allowed) is refused naming it, and none starts when the sandbox cannot
be set up. Real rqworkers run the tasks."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.conf import settings

from tasks.models import ToolCall
from tests.durable.conftest import TEST_CONFIG, durable_settings, fleet, wait_status  # noqa: F401
from tests.factories import spec_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SECRET = f"sk-outside-the-sandbox-{uuid.uuid4().hex}"


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        "sandbox: {disk_mb: 1}\n"
        "openai_agents:\n"
        "  reader:\n"
        '    agent: "tests.security.openai_mcp_agents:reader"\n'
        '    mcp_servers: {reader: {ro_paths: ["{harness}/tests/security/mcp_reader_server.py"]}}\n'
        '  elsewhere: "tests.security.openai_mcp_agents:elsewhere"\n'
        '  remote: "tests.security.openai_mcp_agents:remote"\n'
    )


def agent_task(name: str, ask: str, files: dict[str, str] | None = None):
    spec = {
        "title": name,
        "goal": f"task {uuid.uuid4().hex}: {ask}",
        "agent": {"kind": "openai-agents", "name": name},
        **({"workspace": {"files": files}} if files else {}),
    }
    return spec_task(spec, enqueue=True)


def test_an_agents_own_stdio_server_reads_its_workspace_and_nothing_outside(
    fleet,  # noqa: F811
    tmp_path,
):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    fleet.worker()
    paths = ["inside.txt", str(secret), str(settings.BASE_DIR / "manage.py")]
    task = agent_task(
        "reader", "read " + " ".join(paths), files={"inside.txt": "the workspace's own words"}
    )
    task = wait_status(task.id, "succeeded", "failed")
    assert task.status == "succeeded", task.error_message
    # Each read went through the harness's ledger, as the agent's MCP tools always do.
    rows = {row.arguments["path"]: row for row in ToolCall.objects.filter(task=task)}
    assert set(rows) == set(paths) and {r.status for r in rows.values()} == {"succeeded"}
    inside, outside, harness = (str(rows[p].result["output"]) for p in paths)
    # The secret in a directory outside the workspace and the harness's own code: not there.
    assert SECRET not in outside and "unreadable: FileNotFoundError" in outside
    assert "unreadable: FileNotFoundError" in harness and "django" not in harness.lower()
    # The workspace is its root and working directory.
    assert "read: the workspace's own words" in inside


def test_servers_the_sandbox_cannot_hold_are_refused_naming_them(fleet):  # noqa: F811
    fleet.worker()
    elsewhere, remote = agent_task("elsewhere", "read x"), agent_task("remote", "read x")
    elsewhere = wait_status(elsewhere.id, "failed", "succeeded")
    assert elsewhere.error_class == "mcp_server_refused"
    assert "'etc-reader'" in elsewhere.error_message
    assert "outside the task's workspace" in elsewhere.error_message
    remote = wait_status(remote.id, "failed", "succeeded")
    assert remote.error_class == "mcp_server_refused"
    assert "'somewhere-remote'" in remote.error_message and "remote: true" in remote.error_message
    assert not ToolCall.objects.filter(task__in=[elsewhere, remote]).exists()


def test_no_server_starts_when_the_sandbox_cannot_be_set_up(fleet, tmp_path):  # noqa: F811
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    fleet.pool.env["HARNESS_BWRAP"] = str(tmp_path / "no-such-bwrap")
    fleet.worker()
    task = agent_task("reader", f"read {secret}")
    task = wait_status(task.id, "failed", "succeeded")
    assert task.error_class == "mcp_server_unavailable"
    assert "sandbox" in task.error_message
    assert not ToolCall.objects.filter(task=task).exists()


def test_an_agents_own_server_cannot_pin_a_worker_with_its_output_schema(fleet):  # noqa: F811
    """Its `echo_code` answers "aaa…a!" under an outputSchema pattern `^(a+)+$`: on Python's
    backtracking `re` (the MCP SDK's validator) that holds the worker for hours; on RE2, as
    the harness's own MCP sessions check it, the call fails at once."""
    fleet.worker()
    task = agent_task("reader", f"echo {'a' * 40}!")
    task = wait_status(task.id, "succeeded", "failed", timeout=90)
    assert task.status == "succeeded", task.error_message
    # The SDK tells the model the tool failed (its failure_error_function), and the run goes on.
    (row,) = ToolCall.objects.filter(task=task)
    assert row.tool == "echo_code" and "error occurred" in str(row.result)


def test_an_agents_own_server_is_held_to_the_workspace_quota(fleet):  # noqa: F811
    """harness.yaml `sandbox.disk_mb` (1 MiB here) holds the agent's own server as it holds
    harness.yaml's: a call that leaves the workspace past it fails, its writes taken back."""
    fleet.worker()
    task = agent_task("reader", "fill 3")
    task = wait_status(task.id, "succeeded", "failed")
    (row,) = ToolCall.objects.filter(task=task)
    assert row.tool == "fill" and row.status == "failed"
    assert "disk quota exceeded" in row.error_message and "1.0 MiB" in row.error_message
    assert not list(Path(task.workspace_path).glob("fill-*.bin"))
    # The SDK does not go on past a tool that raised: the task fails saying why.
    assert task.status == "failed" and "disk quota exceeded" in task.error_message
