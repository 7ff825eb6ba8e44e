"""OpenAI Agents SDK agents that bring their own MCP servers (tests/security/
test_openai_agent_mcp_sandbox.py), on a scripted model: `reader` reads, through its own stdio
server, every path its goal names ("task <key>: read <path> <path> ..."), or has it echo a
text ("task <key>: echo <text>") or write MiBs ("task <key>: fill <mib>"), then answers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agents import Agent
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp

from examples.openai_agents_agent import ScriptedTurns, last_output

SERVER = Path(__file__).with_name("mcp_reader_server.py")


def _reads(items: list[Any]) -> list[tuple[str, dict[str, str]]]:
    first = items[0] if items else {}
    goal = str(first.get("content", "") if isinstance(first, dict) else "")
    if " fill " in goal:
        return [("fill", {"mib": int(goal.split(" fill ", 1)[1])})]
    if " echo " in goal:
        return [("echo_code", {"text": goal.split(" echo ", 1)[1].strip()})]
    paths = goal.split(" read ", 1)[1].split() if " read " in goal else []
    return [("read_text", {"path": path}) for path in paths]


def _answer(items: list[Any]) -> str:
    return f"done: {last_output(items)}"


def _agent(name: str, server: Any) -> Agent:
    return Agent(
        name=name,
        instructions="Read the files.",
        mcp_servers=[server],
        model=ScriptedTurns([_reads, _answer]),
    )


def reader() -> Agent:
    """Its server as most agents give one: the worker's interpreter and a script."""
    server = MCPServerStdio(
        params={"command": sys.executable, "args": [str(SERVER)]}, name="reader"
    )
    return _agent("reader", server)


def elsewhere() -> Agent:
    """Its stdio server's working directory is outside any workspace."""
    server = MCPServerStdio(
        params={"command": sys.executable, "args": [str(SERVER)], "cwd": "/etc"},
        name="etc-reader",
    )
    return _agent("elsewhere", server)


def remote() -> Agent:
    """A streamable HTTP server the operator has not allowed."""
    server = MCPServerStreamableHttp(
        params={"url": "http://127.0.0.1:9/mcp"}, name="somewhere-remote"
    )
    return _agent("remote", server)
