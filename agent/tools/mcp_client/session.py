"""An initialized MCP client session to one server: over streamable HTTP (headers from the
worker's environment) or over a sandboxed stdio server, with tools' structured results checked
on RE2."""

from __future__ import annotations

import os
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agent.tools.mcp_client.errors import McpUnavailable
from agent.tools.mcp_client.launch import Started
from agent.tools.mcp_client.stdio import sandboxed_stdio
from agent.tools.sandbox import SandboxProcess
from harness_base.config import McpServerConfig
from tasks.json_schema import json_schema_check, json_schema_validator


def _headers(config: McpServerConfig) -> dict[str, str]:
    """Header values from the worker's environment; a missing variable fails closed."""
    headers = {}
    for header, var in config.headers_env.items():
        value = os.environ.get(var)
        if not value:
            raise McpUnavailable(f"environment variable {var} (for header {header}) is not set")
        headers[header] = value
    return headers


class _ClientSession(ClientSession):
    """The SDK's session, checking a tool's structured results against its `outputSchema` on
    RE2 (tasks/json_schema.py): the SDK's own validator runs the server's patterns on Python's
    backtracking `re`, in this worker, where `^(a+)+$` pins a CPU for hours. Overrides the
    SDK's (pinned) validator factory; its RuntimeError is the SDK's "answered unusably"."""

    def _output_schema_validator(self, name: str, output_schema: dict[str, Any]) -> Any:
        validator = self._tool_output_validators.get(name)
        if validator is None:
            try:
                json_schema_check(schema=output_schema)
            except ValueError as exc:
                raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from None
            validator = json_schema_validator(schema=output_schema)
            self._tool_output_validators[name] = validator
        return validator


def output_schemas_on_re2(session: Any) -> None:
    """A session the MCP SDK made itself (an OpenAI agent's own server's, opened by the Agents
    SDK) checks its tools' structured results on RE2 as _ClientSession does."""
    session._output_schema_validator = types.MethodType(
        _ClientSession._output_schema_validator, session
    )


@asynccontextmanager
async def mcp_session(
    *, server: str, config: McpServerConfig, workspace: Path, started: Started | None = None
) -> AsyncIterator[tuple[Any, SandboxProcess | None]]:
    """(an initialized client session, the sandboxed server process for a stdio server)."""
    if config.url is not None:
        http = create_mcp_http_client(headers=_headers(config))
        async with (
            http,
            streamable_http_client(config.url, http_client=http) as (read, write),
            _ClientSession(read, write) as session,
        ):
            with anyio.fail_after(config.connect_timeout_s):
                await session.initialize()
            yield session, None
    else:
        async with (
            sandboxed_stdio(config=config, workspace=workspace, started=started) as (
                read,
                write,
                process,
            ),
            _ClientSession(read, write) as session,
        ):
            with anyio.fail_after(config.connect_timeout_s):
                await session.initialize()
            yield session, process
