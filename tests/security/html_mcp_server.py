"""A stdio MCP server (official SDK) whose tool descriptions and results carry HTML, for
test_xss_tool_text.py: `python -m tests.security.html_mcp_server`."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ContentBlock, ImageContent, ResourceLink, TextContent, ToolAnnotations

PAYLOAD = (
    '<a href="https://evil.example/" data-evil="1">click</a>'
    '<img src="x" onerror="window.__xss=1"><script>window.__xss=2</script>'
)

# A 1×1 PNG; an "image" that is SVG (script-capable) must never be served as an image.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
    "AAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
SVG = "PHN2ZyBvbmxvYWQ9IndpbmRvdy5fX3hzcz0zIi8+"  # <svg onload="window.__xss=3"/>

server = MCPServer("html")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), description=f"Peek. {PAYLOAD}")
def peek() -> str:
    return f"seen {PAYLOAD}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True), description="Show content blocks.")
def show() -> list[ContentBlock]:
    return [
        TextContent(type="text", text=f"shown {PAYLOAD}"),
        ImageContent(type="image", data=PNG, mimeType="image/png"),
        ImageContent(type="image", data=SVG, mimeType="image/svg+xml"),
        ResourceLink(type="resource_link", uri="javascript:window.__xss=4", name=PAYLOAD),
        ResourceLink(type="resource_link", uri="https://example.org/doc", name="the doc"),
    ]


@server.tool(annotations=ToolAnnotations(destructive_hint=True), description=f"Wipe. {PAYLOAD}")
def wipe(target: str) -> str:
    return f"wiped {target}"


if __name__ == "__main__":
    server.run()
