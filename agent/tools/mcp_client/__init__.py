"""Talking to MCP servers for one task run (the tools are described in tasks/tools/mcp/).

One client session per server per task run, opened on first use and reused, closed when the
job ends; the SDK is async, so every session of a run lives on one event loop in a blocking
portal thread (never `asyncio.run` per call). The call id travels in the request's `_meta`
(`agent-harness/idempotency_key`, `agent-harness/call_id`) so a server can deduplicate.
`isError` results go back to the model as tool errors. A server found dead before a call (a
crashed stdio server) is restarted, once per call attempt; one that dies or times out during a
call is a transient failure for an idempotent tool and an unknown outcome otherwise.

The modules, from the bottom: `errors` (McpUnavailable), `stderr` (a stdio server's last
stderr lines), `launch` (a stdio server's command line and sandbox, venv_mounts),
`start_failures` (why a server did not start), `stdio` (the transport over the sandboxed
process), `session` (an initialized session over HTTP or stdio), `connection` (one open
session and the sandbox limits its server may cross), `content` (progress and answers for the
task page), then McpConnections' parts: `sessions` (lifecycle), `listing`, `calls`, and
`connections` (McpConnections itself); `discovery` (mcp_tools_discover, mcp_tools_now).
Callers import from this package.
"""

from __future__ import annotations

from agent.tools.mcp_client.connection import LimitCrossed, limit_text, quota_end_checked
from agent.tools.mcp_client.connections import McpConnections
from agent.tools.mcp_client.discovery import mcp_tools_discover, mcp_tools_now
from agent.tools.mcp_client.errors import McpUnavailable
from agent.tools.mcp_client.launch import Started, venv_mounts
from agent.tools.mcp_client.session import output_schemas_on_re2
from agent.tools.mcp_client.start_failures import start_failure
from agent.tools.mcp_client.stdio import sandboxed_stdio

__all__ = [
    "LimitCrossed",
    "McpConnections",
    "McpUnavailable",
    "Started",
    "mcp_tools_discover",
    "mcp_tools_now",
    "limit_text",
    "output_schemas_on_re2",
    "quota_end_checked",
    "sandboxed_stdio",
    "start_failure",
    "venv_mounts",
]
