"""Listing a server's tools (McpToolListing, part of McpConnections): paginated and bounded,
each tool's name and schemas checked, the ones the model cannot be offered skipped with why."""

from __future__ import annotations

from typing import Any

from mcp.types import PaginatedRequestParams

from agent.tools.mcp_client.errors import McpUnavailable, describe_error
from agent.tools.mcp_client.sessions import McpSessions
from tasks.agent_state import McpTool
from tasks.tools.mcp import MAX_DESCRIPTION_CHARS, TOOL_NAME, check_tool_schema, mcp_name

MAX_TOOLS_PER_SERVER = 500
MAX_LIST_PAGES = 20


class McpToolListing(McpSessions):
    """McpConnections' discovery: list_tools."""

    def list_tools(self, server: str) -> tuple[list[McpTool], list[str]]:
        """All of a server's tools (paginated) -> (tools, names skipped with the reason)."""
        connection = self.connection(server)
        tools: list[McpTool] = []
        skipped: list[str] = []
        cursor = None
        for _page in range(MAX_LIST_PAGES):
            try:
                result = self._portal.call(self._list_page, connection.session, cursor)
            except BaseException as exc:
                connection.dead = True
                reason = f"listing the tools of {server!r} failed: {describe_error(exc)}"
                self.errors[server] = reason
                raise McpUnavailable(reason, transient=True) from None
            for item in result.tools:
                name = mcp_name(server, item.name)
                problem = None if TOOL_NAME.match(name) else "name not accepted by model APIs"
                problem = (
                    problem
                    or check_tool_schema(schema=item.input_schema, field="inputSchema")
                    or (
                        None
                        if item.output_schema is None
                        else check_tool_schema(schema=item.output_schema, field="outputSchema")
                    )
                )
                task_support = item.execution.task_support if item.execution else None
                if not problem and task_support == "required":
                    # Runs only as an MCP task (create, poll, result), which this client does
                    # not do: offered, it would always fail with "method not found".
                    problem = (
                        "requires MCP task augmentation (execution.taskSupport: required), "
                        "which the harness does not support; not offered to the model"
                    )
                if problem:
                    skipped.append(f"{item.name[:80]}: {problem}")
                    continue
                annotations = (
                    item.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
                    if item.annotations is not None
                    else {}
                )
                tools.append(
                    McpTool(
                        server=server,
                        tool=item.name,
                        description=(item.description or "")[:MAX_DESCRIPTION_CHARS],
                        input_schema=item.input_schema,
                        annotations=annotations,
                    )
                )
            cursor = result.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS_PER_SERVER:
                break
        return tools[:MAX_TOOLS_PER_SERVER], skipped

    @staticmethod
    async def _list_page(session: Any, cursor: str | None) -> Any:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        return await session.list_tools(params=params)
