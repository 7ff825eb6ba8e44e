"""A stdio MCP server (official SDK) whose tool descriptions and results carry HTML, for
test_xss_tool_text.py: `python -m tests.security.html_mcp_server`."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

PAYLOAD = (
    '<a href="https://evil.example/" data-evil="1">click</a>'
    '<img src="x" onerror="window.__xss=1"><script>window.__xss=2</script>'
)

server = MCPServer("html")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), description=f"Peek. {PAYLOAD}")
def peek() -> str:
    return f"seen {PAYLOAD}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True), description=f"Wipe. {PAYLOAD}")
def wipe(target: str) -> str:
    return f"wiped {target}"


if __name__ == "__main__":
    server.run()
