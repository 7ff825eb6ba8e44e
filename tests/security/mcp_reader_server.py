"""A stdio MCP server an OpenAI agent brings itself (`Agent(mcp_servers=[MCPServerStdio(...)])`,
tests/security/openai_mcp_agents.py): `read_text` reads any path it is given and says what it
found, so a test sees what the server process can reach."""

from __future__ import annotations

from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("reader")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def read_text(path: str) -> str:
    """Read a text file."""
    try:
        return "read: " + Path(path).read_text(errors="replace")[:1000]
    except OSError as exc:
        return f"unreadable: {type(exc).__name__}"


if __name__ == "__main__":
    server.run()
