"""An MCP server whose tool list depends on the deploy (MCP_DRIFT_VERSION): version 1 offers
`file_note(title)`, version 2 `file_note(title, priority)` with `priority` required. Every call
is appended to calls.jsonl in MCP_TEST_STATE, so a test counts what reached the server.
`python -m tests.versions_drift.mcp_server PORT` serves streamable HTTP."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("drift-test")
STATE = Path(os.environ["MCP_TEST_STATE"])


def _record(**args: object) -> dict:
    with open(STATE / "calls.jsonl", "a") as fh:
        fh.write(json.dumps(args) + "\n")
    return {"filed": args}


if os.environ.get("MCP_DRIFT_VERSION") == "2":

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    def file_note(title: str, priority: int) -> dict:
        """File a note."""
        return _record(title=title, priority=priority)

else:

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    def file_note(title: str) -> dict:
        """File a note."""
        return _record(title=title)


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
