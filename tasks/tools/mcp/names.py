"""MCP tool names: `<server>__<tool>`, the `<server>__*` pattern, the servers a spec names."""

from __future__ import annotations

import re
from collections.abc import Iterable

from harness_base.config import harness_config

SEPARATOR = "__"
# What every model API accepts as a function name.
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def mcp_name(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


def mcp_server_of(name: str) -> str | None:
    """The configured server a tool name (or `<server>__*`) belongs to, if any."""
    server, sep, _rest = name.partition(SEPARATOR)
    if sep and server in harness_config().mcp_servers:
        return server
    return None


def tool_pattern_matches(pattern: str, name: str) -> bool:
    if pattern.endswith(SEPARATOR + "*"):
        return name.startswith(pattern[:-1])
    return pattern == name


def mcp_servers_named(names: Iterable[str]) -> list[str]:
    """The configured servers a spec's `tools` refer to, in first-mention order."""
    servers: list[str] = []
    for name in names:
        server = mcp_server_of(name)
        if server is not None and server not in servers:
            servers.append(server)
    return servers
