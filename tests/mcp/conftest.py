"""MCP servers written with the official SDK (tests/mcp/server.py), started by the tests, and
the durable-execution fleet (real rqworkers, a sweeper) configured to use them."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, free_port, spawn, wait_for
from tests.durable.conftest import (  # noqa: F401  (fixtures)
    durable_settings,
    fleet,
    queue,
    wait_status,
)

BASE_CONFIG = """
retry: {initial_s: 0.2, factor: 2, max_s: 5, jitter: full, max_attempts: 4}
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
review_rules:
  - {name: destructive, risk: destructive, action: review}
  - {name: external, risk: external, action: review}
"""


# An environment variable no process here sets: a header that names it cannot be sent.
UNSET = "MCP_TEST_TOKEN_NEVER_SET"


class McpHttpServer:
    def __init__(self, *, state: Path, port: int, process: subprocess.Popen) -> None:
        self.state = state
        self.port = port
        self.process = process
        self.url = f"http://127.0.0.1:{port}/mcp"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        path = self.state / "calls.jsonl"
        if not path.exists():
            return []
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        return [row for row in rows if tool is None or row["tool"] == tool]


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def http_server_start(*, state: Path, port: int) -> McpHttpServer:
    """Start tests/mcp/server.py over streamable HTTP on `port`; returns once it listens."""
    process = spawn(
        ["http", str(port)],
        module="tests.mcp.server",
        log=state / "server.log",
        env={"PATH": "/usr/bin:/bin", "MCP_TEST_STATE": str(state), "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_for(lambda: _accepts(port), 60, message="the MCP HTTP server to listen")
    except BaseException:
        process.kill()
        process.wait(timeout=10)
        raise
    return McpHttpServer(state=state, port=port, process=process)


@pytest.fixture(scope="module")
def mcp_http(tmp_path_factory) -> Iterator[McpHttpServer]:
    """The test server over streamable HTTP, shared by a module's tests (use distinct keys)."""
    server = http_server_start(state=tmp_path_factory.mktemp("mcp-http"), port=free_port())
    try:
        yield server
    finally:
        server.process.kill()
        server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def late_port() -> int:
    """A port no server listens on until a test starts one there (server `late`)."""
    return free_port()


@pytest.fixture
def harness_config_text(mcp_http: McpHttpServer, late_port: int) -> str:
    # `down` points at a port nothing listens on; `late` at one a test may start a server on.
    return (
        BASE_CONFIG
        + "mcp_servers:\n"
        + f"  remote: {{url: {json.dumps(mcp_http.url)}}}\n"
        + f"  late: {{url: 'http://127.0.0.1:{late_port}/mcp'}}\n"
        + f"  down: {{url: 'http://127.0.0.1:{free_port()}/mcp', connect_timeout_s: 5}}\n"
        + f"  locked: {{url: {json.dumps(mcp_http.url)}, "
        + f"headers_env: {{Authorization: {UNSET}}}}}\n"
    )
