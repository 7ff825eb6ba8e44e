"""The agent's own MCP servers (`Agent(mcp_servers=[...])`) as the harness runs them
(McpSandbox, part of AgentsRun): a stdio server (`MCPServerStdio`) starts inside the task's
sandbox exactly as a harness.yaml stdio server does (agent.tools.mcp_client's sandboxed_stdio:
bubblewrap over the workspace, the environment it is given and nothing else, no network, the
limits of run_command), with the read-only mounts and network harness.yaml's entry for the agent
grants it (AgentMcpServer); a remote server only when that entry allows it (`remote: true`).
Any other server, or a stdio server whose launch the sandbox cannot express (a working
directory outside the workspace, an encoding other than UTF-8), is refused: the task fails
`mcp_server_refused` naming the server, before anything starts. The operator's server objects
are not changed: the run connects copies."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from agents.mcp import MCPServer, MCPServerSse, MCPServerStdio, MCPServerStreamableHttp
from agents.mcp._logging import get_mcp_server_log_name
from agents.tool import get_function_tool_origin
from pydantic import ValidationError

from agent.openai_agents_runner.core import RunCore
from agent.openai_agents_runner.loading import agent_entry
from agent.runtime.run import StopRun
from agent.tools.mcp_client import (
    LimitCrossed,
    Started,
    limit_text,
    output_schemas_on_re2,
    quota_end_checked,
    sandboxed_stdio,
    start_failure,
)
from agent.tools.mcp_client.errors import describe_error
from agent.tools.sandbox import SandboxUnavailable, sandbox_check
from harness_base.config import AgentMcpServer, McpServerConfig

log = logging.getLogger(__name__)

REFUSED = "mcp_server_refused"


class ServerRefused(Exception):
    pass


def _cwd_inside(cwd: Any, workspace: Path) -> str:
    """The server's working directory relative to the workspace: none is the workspace itself;
    a relative one lies under it; an absolute one must lie inside it."""
    if cwd is None or str(cwd) == "":
        return "."
    path = Path(cwd)
    if path.is_absolute():
        root = workspace.resolve()
        resolved = path.resolve()
        if resolved != root and root not in resolved.parents:
            raise ServerRefused(
                f"its working directory {str(cwd)!r} is outside the task's workspace (the "
                "sandbox shows the server the workspace only): give no cwd, or one inside it"
            )
        return str(PurePosixPath(resolved.relative_to(root))) or "."
    if "\x00" in str(cwd) or ".." in path.parts:
        raise ServerRefused(f"its working directory {str(cwd)!r} leaves the workspace")
    return str(PurePosixPath(path))


def stdio_launch(
    server: MCPServerStdio, grant: AgentMcpServer, workspace: Path
) -> tuple[McpServerConfig, str]:
    """The harness.yaml stdio configuration the server's launch amounts to, and its working
    directory inside the workspace; ServerRefused when the sandbox cannot express it."""
    params = server.params
    if str(params.encoding).lower().replace("_", "-") not in ("utf-8", "utf8"):
        raise ServerRefused(f"its encoding {params.encoding!r} is not UTF-8")
    cwd = _cwd_inside(params.cwd, workspace)
    try:
        config = McpServerConfig(
            command=[params.command, *params.args],
            env=dict(params.env or {}),
            ro_paths=grant.ro_paths,
            network=grant.network,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ServerRefused(f"its launch cannot run in the sandbox: {problems}") from None
    return config, cwd


def _fresh_copy(server: MCPServer) -> Any:
    """A copy of an unconnected server with its own session state (its exit stack and locks
    belong to this run's event loop); the operator's object is never connected."""
    clone: Any = copy.copy(server)
    clone.session = None
    clone.exit_stack = AsyncExitStack()
    clone._cleanup_lock = asyncio.Lock()
    clone._request_lock = asyncio.Lock()
    return clone


def _limits_after(process: Any, tool: str) -> None:
    crossed = process.check_limits()
    if crossed is not None:
        process.kill(crossed)
        raise LimitCrossed(limit_text(crossed, process), crossed).error
    quota_end_checked(process, tool)


class McpSandbox(RunCore):
    """AgentsRun's MCP servers: server_sandboxed (for the wrapped agent graph), servers_connect."""

    def server_sandboxed(self, server: Any, *, agent_name: str) -> Any:
        """The server as this run connects it (one copy per server object), or StopRun
        `mcp_server_refused` naming it and saying why."""
        known = self.mcp_copies.get(id(server))
        if known is not None:
            return known
        name = str(getattr(server, "name", "") or type(server).__name__)
        entry = agent_entry(str(getattr(self.spec.agent, self.NAME_KEY)))
        grant = (entry.mcp_servers.get(name) if entry else None) or AgentMcpServer()
        try:
            sandboxed = self._sandboxed(server, name=name, grant=grant)
        except ServerRefused as exc:
            raise StopRun(
                REFUSED,
                f"MCP server {name!r} of agent {agent_name!r} was refused: {exc}",
            ) from None
        self.mcp_copies[id(server)] = sandboxed
        self.mcp_servers.append(sandboxed)
        return sandboxed

    def _sandboxed(self, server: Any, *, name: str, grant: AgentMcpServer) -> Any:
        if isinstance(server, MCPServerStdio):
            config, cwd = stdio_launch(server, grant, self.workspace)
            clone = _fresh_copy(server)
            started = Started()
            workspace = self.workspace

            @asynccontextmanager
            async def streams() -> AsyncIterator[tuple[Any, Any]]:
                async with sandboxed_stdio(
                    config=config, workspace=workspace, started=started, cwd=cwd
                ) as (read, write, _process):
                    yield read, write

            clone.create_streams = streams
            self.mcp_started[id(clone)] = (name, started)
            self.mcp_started_by_name[get_mcp_server_log_name(name)] = started
            return clone
        if isinstance(server, (MCPServerSse, MCPServerStreamableHttp)):
            if grant.remote:
                return _fresh_copy(server)
            raise ServerRefused(
                "it is a remote server the operator has not allowed: add "
                f"`mcp_servers: {{{name!r}: {{remote: true}}}}` to the agent's entry in "
                "harness.yaml `openai_agents`, or configure it in harness.yaml `mcp_servers`"
            )
        raise ServerRefused(
            f"{type(server).__name__} is neither a stdio server (run in the task's sandbox) "
            "nor an SSE / streamable HTTP one: the harness cannot sandbox it"
        )

    def quota_guarded(self, tool: Any, original: Callable[..., Any]) -> Callable[..., Any]:
        """A tool of a sandboxed stdio server, called as the harness calls a harness.yaml
        server's: the workspace quota measured afresh before (its processes' per-file cap is
        what is left), and after it a server past a limit is stopped and the call fails
        (additions past the quota taken back). Other tools: `original` itself."""
        origin = get_function_tool_origin(tool)
        started = self.mcp_started_by_name.get(str(getattr(origin, "mcp_server_name", "")))
        if started is None:
            return original

        async def guarded(context: Any, arguments: str) -> Any:
            process = started.process
            if process is None:
                return await original(context, arguments)
            await asyncio.to_thread(process.quota_restart)
            output = await original(context, arguments)
            await asyncio.to_thread(_limits_after, process, str(tool.name))
            return output

        return guarded

    async def servers_connect(self) -> list[Any]:
        """Connect the run's servers; the ones connected so far. A stdio server needs the
        sandbox (fail closed: none starts without it); one that does not start fails the task
        `mcp_server_unavailable` with its exit code and last stderr lines. Each session checks
        its tools' structured results on RE2, as the harness's own MCP sessions do."""
        connected: list[Any] = []
        try:
            if any(id(s) in self.mcp_started for s in self.mcp_servers):
                try:
                    sandbox_check()
                except SandboxUnavailable as exc:
                    raise StopRun("mcp_server_unavailable", str(exc)) from None
            for server in self.mcp_servers:
                try:
                    await server.connect()
                except Exception as exc:
                    name, started = self.mcp_started.get(id(server), (server.name, None))
                    reason = f"could not start MCP server {name!r}: {describe_error(exc)}"
                    error = start_failure(name, started, reason)
                    raise StopRun("mcp_server_unavailable", str(error)[:4000]) from None
                connected.append(server)
                if server.session is not None:
                    # A server's outputSchema patterns never run on Python's backtracking re.
                    output_schemas_on_re2(server.session)
        except BaseException:
            await self.servers_close(connected)
            raise
        return connected

    async def servers_close(self, connected: list[Any]) -> None:
        """Close the servers (a stdio server's sandbox is killed with all it started)."""
        for server in reversed(connected):
            try:
                await server.cleanup()
            except Exception:
                log.warning("task %s: closing MCP server %s failed", self.task_id, server.name)
