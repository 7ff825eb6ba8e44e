"""The MCP server the tests start, written with the official SDK: `python -m tests.mcp.server
stdio` or `... http PORT`. Every call is appended to `calls.jsonl` in MCP_TEST_STATE (default:
the working directory) with its arguments and the harness's idempotency key from `_meta`, so
tests count what really reached the server."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("harness-test")
STATE = Path(os.environ["MCP_TEST_STATE"]) if os.environ.get("MCP_TEST_STATE") else None
# Tells one run of this server from the next (PIDs repeat inside a sandbox's PID namespace).
BOOT = uuid.uuid4().hex


def record(ctx: Context, tool: str, **args: object) -> str:
    """Append the call to calls.jsonl in MCP_TEST_STATE (not set for stdio runs, whose only
    writable folder is the task workspace)."""
    meta = dict(ctx.request_context.meta or {})
    key = str(meta.get("agent-harness/idempotency_key", ""))
    if STATE is not None:
        with open(STATE / "calls.jsonl", "a") as fh:
            fh.write(json.dumps({"tool": tool, "args": args, "key": key, "boot": BOOT}) + "\n")
    return key


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(key: str, ctx: Context) -> dict:
    """Look up a record by key."""
    key_seen = record(ctx, "lookup", key=key)
    return {"key": key, "value": key.upper(), "idempotency_key": key_seen, "boot": BOOT}


@server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
def purge(key: str, ctx: Context) -> dict:
    """Delete a record for good."""
    record(ctx, "purge", key=key)
    return {"purged": key}


@server.tool()
def unmarked(key: str, ctx: Context) -> dict:
    """A tool that declares no annotations."""
    record(ctx, "unmarked", key=key)
    return {"ok": key}


# A tracker pair for compensations (issue #44): harness.yaml maps create_issue to close_issue.
ISSUE = ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True)


@server.tool(annotations=ISSUE)
def create_issue(project: str, title: str, ctx: Context) -> dict:
    """Open an issue in a project; the same idempotency key gets the same issue."""
    key = record(ctx, "create_issue", project=project, title=title)
    return {"id": f"{project}-{uuid.uuid5(uuid.NAMESPACE_URL, key).hex[:8]}", "title": title}


@server.tool(annotations=ISSUE)
def close_issue(project: str, id: str, ctx: Context) -> dict:
    """Close an issue (closing it again changes nothing)."""
    record(ctx, "close_issue", project=project, id=id)
    return {"closed": id}


@server.tool(
    annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
)
async def sync(key: str, slow_times: int, ctx: Context) -> dict:
    """Synchronise a record; the first `slow_times` calls for a key hang past any timeout."""
    record(ctx, "sync", key=key)
    seen = sum(
        1
        for line in (STATE / "calls.jsonl").read_text().splitlines()
        if json.loads(line)["tool"] == "sync" and json.loads(line)["args"]["key"] == key
    )
    if seen <= slow_times:
        await anyio.sleep(30)
    return {"synced": key, "attempt": seen}


@server.tool(
    annotations=ToolAnnotations(
        destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
)
async def note(text: str, ctx: Context) -> dict:
    """Append a note (not idempotent); waits while the test holds `hold` in the state folder."""
    record(ctx, "note", text=text)
    while (STATE / "hold").exists():
        await anyio.sleep(0.05)
    return {"noted": text}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def refuse(reason: str, ctx: Context) -> str:
    """Always fails, reporting `reason` as a tool error."""
    record(ctx, "refuse", reason=reason)
    raise ToolError(f"refused: {reason}")


@server.tool(
    annotations=ToolAnnotations(
        destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
)
def crash(ctx: Context) -> str:
    """The server process dies in the middle of the call."""
    record(ctx, "crash")
    os._exit(17)


@server.tool(
    annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
)
def write_text(path: str, content: str, ctx: Context) -> dict:
    """Write a text file relative to the server's working directory (the task workspace)."""
    record(ctx, "write_text", path=path)
    Path(path).write_text(content)
    return {"path": path, "bytes": len(content)}


@server.tool(
    annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
)
def fill(path: str, mib: int, ctx: Context) -> dict:
    """Write `mib` files of 1 MiB each (`<path>.<n>`) in the working directory, ten a second."""
    record(ctx, "fill", path=path, mib=mib)
    for n in range(mib):
        with open(f"{path}.{n}", "wb") as fh:
            fh.write(b"\1" * 1024**2)
            fh.flush()
            os.fsync(fh.fileno())
        time.sleep(0.1)
    return {"path": path, "mib": mib}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def exit_soon(ctx: Context) -> dict:
    """Answers, then the server process exits (as a crashing server would, between calls)."""
    record(ctx, "exit_soon")
    threading.Timer(0.2, os._exit, args=(3,)).start()
    return {"boot": BOOT}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def probe(path: str, ctx: Context) -> dict:
    """What the server process can see: its uid, working directory, environment variable
    names, whether `path` exists, and how many processes are visible."""
    record(ctx, "probe", path=path)
    return {
        "uid": os.getuid(),
        "cwd": os.getcwd(),
        "env": sorted(os.environ),
        "exists": os.path.exists(path),
        "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
    }


# A pattern Python's backtracking `re` takes hours on for "aaa…a!" (RE2: microseconds).
EVIL_PATTERN = r"^(a+)+$"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def spell(code: Annotated[str, Field(pattern=EVIL_PATTERN)], ctx: Context) -> dict:
    """Takes a code of a's only: its inputSchema carries a pattern that backtracks."""
    record(ctx, "spell", code=code)
    return {"code": code}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def screen(
    name: Annotated[str, Field(json_schema_extra={"pattern": "^(?!admin)"})], ctx: Context
) -> dict:
    """Its inputSchema carries a lookahead, which RE2 (linear time) cannot run."""
    record(ctx, "screen", name=name)
    return {"name": name}


class Echoed(BaseModel):
    text: Annotated[str, Field(pattern=EVIL_PATTERN)]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo_code(text: str, ctx: Context) -> Echoed:
    """Echoes `text`; its outputSchema carries a pattern that backtracks."""
    record(ctx, "echo_code", text=text)
    return Echoed.model_construct(text=text)


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
