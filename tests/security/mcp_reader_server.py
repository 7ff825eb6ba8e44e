"""A stdio MCP server an OpenAI agent brings itself (`Agent(mcp_servers=[MCPServerStdio(...)])`,
tests/security/openai_mcp_agents.py): `read_text` reads any path it is given and says what it
found, so a test sees what the server process can reach; `echo_code`'s outputSchema carries a
pattern Python's backtracking `re` takes hours on for "aaa…a!" (RE2: microseconds); `fill`
writes MiBs into its working directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("reader")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def read_text(path: str) -> str:
    """Read a text file."""
    try:
        return "read: " + Path(path).read_text(errors="replace")[:1000]
    except OSError as exc:
        return f"unreadable: {type(exc).__name__}"


class Echoed(BaseModel):
    text: Annotated[str, Field(pattern=r"^(a+)+$")]


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def echo_code(text: str) -> Echoed:
    """Echoes `text` (its outputSchema's pattern backtracks)."""
    return Echoed.model_construct(text=text)


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, open_world_hint=False))
def fill(mib: int) -> str:
    """Write `mib` MiB into its working directory, in files of 256 KiB."""
    for index in range(mib * 4):
        Path(f"fill-{index}.bin").write_bytes(b"x" * 256 * 1024)
    return f"wrote {mib} MiB"


if __name__ == "__main__":
    server.run()
