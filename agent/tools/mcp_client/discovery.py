"""A task's MCP tools: the servers its spec names, listed, and the tools it may use chosen
from them (a tool named one by one that is not offered fails closed)."""

from __future__ import annotations

from typing import Any

from agent.tools.mcp_client.connections import McpConnections
from agent.tools.mcp_client.errors import McpUnavailable
from tasks.agent_state import McpTool
from tasks.tools.mcp import mcp_server_of, mcp_servers_named, tool_pattern_matches


def mcp_tools_discover(
    *, connections: McpConnections, names: list[str]
) -> tuple[list[McpTool], list[dict[str, Any]]]:
    """List the servers a spec names -> (the tools it may use, one report per server for the
    `mcp_tools_listed` event). A tool named one by one that the server does not offer fails
    closed (McpUnavailable names it)."""
    chosen: list[McpTool] = []
    reports: list[dict[str, Any]] = []
    for server in mcp_servers_named(names):
        tools, skipped = connections.list_tools(server)
        patterns = [n for n in names if mcp_server_of(n) == server]
        offered = {t.name for t in tools}
        missing = [p for p in patterns if not p.endswith("*") and p not in offered]
        if missing:
            raise McpUnavailable(
                f"MCP server {server!r} does not offer {', '.join(missing)}; it offers: "
                + (", ".join(sorted(offered))[:1000] or "(no tools)")
            )
        mine = [t for t in tools if any(tool_pattern_matches(p, t.name) for p in patterns)]
        chosen.extend(mine)
        reports.append(
            {
                "server": server,
                "transport": connections.servers[server].transport,
                "tool_count": len(tools),
                "tools": [t.model_dump(mode="json") for t in mine],
                **({"skipped": skipped[:20]} if skipped else {}),
            }
        )
    return chosen, reports


def mcp_tools_now(*, connections: McpConnections, names: list[str]) -> list[McpTool] | None:
    """What the servers a spec names offer now, of the tools it may use (a tool named one by
    one that is gone is left out, not refused: a resumed task's drift check says it is gone).
    None when a server cannot be listed now."""
    now: list[McpTool] = []
    try:
        for server in mcp_servers_named(names):
            tools, _skipped = connections.list_tools(server)
            patterns = [n for n in names if mcp_server_of(n) == server]
            now += [t for t in tools if any(tool_pattern_matches(p, t.name) for p in patterns)]
    except McpUnavailable:
        return None
    return now
