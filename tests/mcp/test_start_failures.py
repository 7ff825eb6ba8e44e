"""Stdio MCP servers that cannot start, with real commands: a missing binary, a Node script
that does not exist, `npx -y` without network, a script whose interpreter is not mounted; and
the PyPI reference servers `mcp-server-time` and `mcp-server-git` installed in the harness's
virtualenv, whose base interpreter lives outside the sandbox's system directories and is
mounted automatically. A command that cannot start fails at once, classified permanent, with
the server's last stderr lines and how to fix it; it is not retried."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.tools.mcp_client import McpConnections, McpUnavailable, venv_mounts
from tasks.tools.registry import ToolContext
from tests.factories import queued_task, run_in_process

from .conftest import BASE_CONFIG

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

VENV_BIN = Path(sys.executable).parent

CONFIG = f"""
mcp_servers:
  missing: {{command: ["/nonexistent/bin/mcp-server"]}}
  unpathed: {{command: ["mcp-server-nowhere-on-path"]}}
  nomodule: {{command: ["node", "/nonexistent/server.js"]}}
  npx: {{command: ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/workspace"]}}
  time:
    command: [{json.dumps(str(VENV_BIN / "mcp-server-time"))}, "--local-timezone", "UTC"]
  git:
    command: [{json.dumps(str(VENV_BIN / "mcp-server-git"))}, "--repository", "/workspace"]
"""


# A script outside any venv whose #! names the base interpreter (not a system directory):
# nothing mounts that interpreter, so the script is "not found" and the error says why.
BASE_PYTHON = Path(sys.base_prefix) / "bin" / "python3"


@pytest.fixture
def harness_config_text(tmp_path) -> str:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    script = scripts / "server"
    script.write_text(f"#!{BASE_PYTHON}\nprint('never runs')\n")
    script.chmod(0o755)
    unmounted = f'  unmounted: {{command: ["{script}"], ro_paths: ["{scripts}"]}}\n'
    return BASE_CONFIG + CONFIG + unmounted


@pytest.fixture
def connections(durable_settings, tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    mcp = McpConnections(task_id="start-failures", workspace=workspace)
    yield mcp
    mcp.close()


def _start_error(connections: McpConnections, server: str) -> McpUnavailable:
    with pytest.raises(McpUnavailable) as caught:
        connections.list_tools(server)
    return caught.value


def test_missing_binary_cannot_start_and_says_so_with_its_stderr(connections):
    error = _start_error(connections, "missing")
    text = str(error)
    assert not error.transient
    assert "could not start MCP server 'missing'" in text
    assert "exited with code 127 before the session was up" in text
    assert "/nonexistent/bin/mcp-server does not exist on this machine" in text
    # The shell's own words, from the server's stderr.
    assert "its last stderr lines:\n  init: 1: /nonexistent/bin/mcp-server: not found" in text
    assert connections.errors["missing"] == text


def test_command_not_on_the_sandbox_path_is_named(connections):
    error = _start_error(connections, "unpathed")
    assert not error.transient
    assert "'mcp-server-nowhere-on-path' is not on the sandbox's PATH" in str(error)


def test_missing_node_module_cannot_start(connections):
    error = _start_error(connections, "nomodule")
    text = str(error)
    assert not error.transient
    assert "a Node module it loads is not there" in text
    assert "Error: Cannot find module '/nonexistent/server.js'" in text
    # Bounded: the last lines only, never the whole stream.
    assert len(text.split("its last stderr lines:")[1]) <= 4096 + 100


def test_npx_without_network_says_to_install_the_package_beforehand(connections):
    error = _start_error(connections, "npx")
    text = str(error)
    assert not error.transient
    assert "needs the network to fetch a package (`npx -y` downloads it)" in text
    assert "npm install --prefix DIR PACKAGE" in text
    assert "npm error code ENOTCACHED" in text


@pytest.mark.skipif(
    str(Path(sys.base_prefix).resolve()).startswith(("/usr/", "/bin/", "/lib")),
    reason="the base interpreter is in a system directory, which every sandbox has",
)
def test_script_whose_interpreter_is_not_mounted_says_which(connections):
    error = _start_error(connections, "unmounted")
    assert not error.transient
    assert f"its interpreter {BASE_PYTHON} (its #! line) is not inside the sandbox" in str(error)


def test_venv_server_gets_its_base_interpreter_mounted(connections):
    # The venv's python is a symlink into the base installation (`home =` in pyvenv.cfg).
    base = Path(sys.base_prefix).resolve()
    mounts = venv_mounts(str(VENV_BIN / "mcp-server-time"))
    assert Path(sys.prefix) in mounts
    if not str(base).startswith(("/usr/", "/bin/", "/lib")):
        assert base in mounts
    # No ro_paths configured: the PyPI reference server starts and answers in the sandbox.
    tools, skipped = connections.list_tools("time")
    assert {t.tool for t in tools} >= {"get_current_time", "convert_time"}
    assert skipped == []


def test_server_that_cannot_start_fails_the_task_at_once_without_retries(durable_settings):
    task = queued_task(
        [{"call": "missing__anything", "args": {}}, {"final": "never"}], ["missing__*"]
    )
    assert run_in_process(task) != "retry"
    assert task.status == "failed"
    assert task.error_class == "mcp_unavailable"
    assert "it cannot start: the command was not found inside the sandbox" in task.error_message
    assert "init: 1: /nonexistent/bin/mcp-server: not found" in task.error_message
    assert not task.events.filter(type="retry_scheduled").exists()


def test_venv_git_server_answers_about_the_workspace_repository(connections):
    workspace = connections.workspace
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "notes.txt").write_text("untracked\n")
    tools, _ = connections.list_tools("git")
    status = next(t for t in tools if t.tool == "git_status")
    ctx = ToolContext(task_id="start-failures", call_id="0.1.0", workspace=workspace, timeout_s=60)
    result = connections.call(status, ctx, {"repo_path": "/workspace"}, idempotent=True)
    assert "notes.txt" in result["text"]
