"""A small MCP server, written with the official SDK, that the demo data uses as a tool source:
notes kept as text files under `notes/` in its working directory. Run by the harness as a stdio
server inside the task's sandbox, the working directory is the task workspace, so what it
changes is captured by checkpoints and undone by a rollback.

    python -m examples.mcp_notes            # stdio (what harness.yaml `mcp_servers.notes` runs)

One read-only tool (`list_notes`, runs without review) and one destructive tool
(`delete_note`, paused for review by the `destructive` rule) show how annotations drive policy.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("notes")
NOTES = Path("notes")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$")


def _note(name: str) -> Path:
    if not NAME.match(name) or name.startswith(".."):
        raise ToolError(f"{name!r} is not a note name (letters, digits, _ . -)")
    return NOTES / name


@server.tool(annotations=ToolAnnotations(title="List notes", read_only_hint=True))
def list_notes() -> dict:
    """List the notes with their first line."""
    if not NOTES.is_dir():
        return {"notes": []}
    notes = []
    for path in sorted(NOTES.iterdir()):
        if path.is_file() and not path.is_symlink():
            first = path.read_text(errors="replace").splitlines()[:1]
            notes.append({"name": path.name, "first_line": first[0] if first else ""})
    return {"notes": notes}


@server.tool(
    annotations=ToolAnnotations(
        title="Delete a note", destructive_hint=True, idempotent_hint=True, open_world_hint=False
    )
)
def delete_note(name: str) -> dict:
    """Delete a note for good."""
    path = _note(name)
    if path.is_symlink() or not path.is_file():
        raise ToolError(f"there is no note named {name!r}")
    path.unlink()
    return {"deleted": name}


if __name__ == "__main__":
    server.run()
