"""McpConnections: the MCP sessions of one task run, with what the tool registry takes from
them (a tool's caller and its fingerprinter). The parts: sessions (lifecycle), listing, calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.tools.mcp_client.calls import McpToolCalls
from agent.tools.mcp_client.errors import McpUnavailable
from agent.tools.mcp_client.listing import McpToolListing
from tasks.agent_state import McpTool
from tasks.canonical import canonical_hash
from tasks.tools.mcp import JsonSchemaArgs
from tasks.tools.registry import ToolContext


class McpConnections(McpToolCalls, McpToolListing):
    """The MCP sessions of one task run, on one event loop (a blocking portal thread) that
    starts with the first session and stops in `close()` at the end of the job."""

    def fingerprinter(self, tool: McpTool) -> Callable[[ToolContext, Any], list[dict[str, Any]]]:
        """The call's target (tasks.fingerprint): the server's tool list and this tool's entry
        in it, as the server lists them now (a server that changed a tool after a review
        opened does not run it on that approval)."""

        def fingerprint(ctx: ToolContext, args: Any) -> list[dict[str, Any]]:
            target: dict[str, Any] = {"kind": "mcp", "key": tool.name}
            try:
                listed, _skipped = self.list_tools(tool.server)
            except McpUnavailable as exc:
                return [{**target, "unverified": str(exc)}]
            entries = [t.model_dump(mode="json") for t in listed]
            mine = next((e for e in entries if e["tool"] == tool.tool), None)
            return [
                {
                    **target,
                    "tool_list": canonical_hash(entries),
                    "schema": canonical_hash(mine) if mine is not None else None,
                }
            ]

        return fingerprint

    def caller(self, tool: McpTool, *, idempotent: bool) -> Callable[[ToolContext, Any], Any]:
        def call(ctx: ToolContext, args: JsonSchemaArgs) -> Any:
            return self.call(tool, ctx, args.arguments(), idempotent=idempotent)

        return call
