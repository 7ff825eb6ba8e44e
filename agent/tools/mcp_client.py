"""Talking to MCP servers for one task run (the tools are described in tasks/tools/mcp.py).

One client session per server per task run, opened on first use and reused, closed when the
job ends; the SDK is async, so every session of a run lives on one event loop in a blocking
portal thread (never `asyncio.run` per call). The call id travels in the request's `_meta`
(`agent-harness/idempotency_key`, `agent-harness/call_id`) so a server can deduplicate.
`isError` results go back to the model as tool errors. A server found dead before a call (a
crashed stdio server) is restarted, once per call attempt; one that dies or times out during a
call is a transient failure for an idempotent tool and an unknown outcome otherwise.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal
from django.conf import settings
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp.types import PaginatedRequestParams, jsonrpc_message_adapter

from agent.retry import TIMEOUT, TRANSIENT, UNKNOWN_OUTCOME
from agent.tools.command import command_limits
from agent.tools.quota import DiskQuotaExceeded
from agent.tools.sandbox import (
    SandboxProcess,
    SandboxUnavailable,
    limit_message,
    sandbox_spawn,
)
from harness_site.config import McpServerConfig, harness_config
from tasks.agent_state import McpTool
from tasks.canonical import canonical_hash
from tasks.json_schema import json_schema_check, json_schema_validator
from tasks.models import OutputKind
from tasks.outputs import CallOutput
from tasks.tools.mcp import (
    MAX_DESCRIPTION_CHARS,
    TOOL_NAME,
    JsonSchemaArgs,
    check_tool_schema,
    content_text,
    mcp_name,
    mcp_server_of,
    mcp_servers_named,
    result_json,
    tool_pattern_matches,
)
from tasks.tools.registry import PermanentToolError, ToolContext, ToolError, TransientToolError

META_KEY = "agent-harness/idempotency_key"
CALL_ID_META_KEY = "agent-harness/call_id"
MAX_TOOLS_PER_SERVER = 500
MAX_LIST_PAGES = 20
PING_TIMEOUT_S = 5.0
# The longest JSON-RPC message a stdio server may send (one line).
MAX_MESSAGE_BYTES = 16 * 1024**2
# How often a running call checks its stdio server's sandbox limits (the workspace quota).
LIMIT_CHECK_S = 1.0
# The SDK's own read timeout stops a call this much before the harness's tool timeout, so the
# call ends with a classified error (timeout / unknown outcome) instead of being abandoned.
TIMEOUT_MARGIN_S = 0.5
# JSON-RPC error codes the SDK's client raises itself (mcp_types.jsonrpc).
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001


class McpUnavailable(Exception):
    """A server could not be started, reached or listed. `transient`: trying again later may
    help (it did not answer); otherwise the configuration or the server's tool list is wrong."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def _headers(config: McpServerConfig) -> dict[str, str]:
    """Header values from the worker's environment; a missing variable fails closed."""
    headers = {}
    for header, var in config.headers_env.items():
        value = os.environ.get(var)
        if not value:
            raise McpUnavailable(f"environment variable {var} (for header {header}) is not set")
        headers[header] = value
    return headers


# --- stdio servers, inside the task's sandbox --------------------------------------------------


def _expand(value: str) -> str:
    """`{python}`: the worker's own interpreter; `{harness}`: the harness's base directory (so
    a shipped example server is configured without machine-specific paths)."""
    return value.replace("{python}", sys.executable).replace("{harness}", str(settings.BASE_DIR))


def server_spawn(*, config: McpServerConfig, workspace: Path) -> SandboxProcess:
    """Start a stdio server in a sandbox of its own over the task's workspace (its working
    directory): its configured environment (plus PATH and the sandbox's basics) and nothing
    else, `ro_paths` read-only, no network unless configured. The limits of `run_command`
    apply for the whole sandbox, without a wall or CPU clock: the server lives as long as the
    run and is killed, with everything it started, when the run ends."""
    argv = [_expand(part) for part in config.command or []]
    ro_paths = [Path(_expand(path)) for path in config.ro_paths]
    if any("{python}" in part for part in config.command or []):
        # The interpreter needs its environment (a virtualenv) and its base installation.
        ro_paths += [Path(sys.prefix), Path(sys.base_prefix)]
    limits = dataclasses.replace(command_limits(1), wall_s=None, cpu_s=None)
    return sandbox_spawn(
        argv=argv,
        workspace=workspace,
        limits=limits,
        env={key: _expand(value) for key, value in config.env.items()},
        network=config.network,
        ro_paths=list(dict.fromkeys(ro_paths)),
        stderr=subprocess.DEVNULL,
    )


def _readline(pipe: Any) -> bytes:
    try:
        return pipe.readline(MAX_MESSAGE_BYTES)
    except (OSError, ValueError):  # closed under us by the shutdown
        return b""


def _write(pipe: Any, data: bytes) -> None:
    pipe.write(data)
    pipe.flush()


@asynccontextmanager
async def sandboxed_stdio(
    *, config: McpServerConfig, workspace: Path
) -> AsyncIterator[tuple[Any, Any, SandboxProcess]]:
    """The SDK's stdio transport, over a sandboxed process: newline-delimited JSON-RPC on its
    stdin and stdout (blocking pipe I/O in worker threads), and at the end a `close()` that
    kills everything the server started. Yields the streams and the process."""
    process = await anyio.to_thread.run_sync(
        functools.partial(server_spawn, config=config, workspace=workspace)
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        async with read_writer:
            while line := await anyio.to_thread.run_sync(
                _readline, process.stdout, abandon_on_cancel=True
            ):
                try:
                    item: SessionMessage | Exception = SessionMessage(
                        jsonrpc_message_adapter.validate_json(line, by_name=False)
                    )
                except ValueError as exc:
                    item = exc
                try:
                    await read_writer.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def stdin_writer() -> None:
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await anyio.to_thread.run_sync(
                        _write, process.stdin, (data + "\n").encode(), abandon_on_cancel=True
                    )
                except (OSError, ValueError):
                    # The server is gone: end the session's reads instead of hanging.
                    await read_writer.aclose()
                    return

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(stdout_reader)
            tasks.start_soon(stdin_writer)
            try:
                yield read_stream, write_stream, process
            finally:
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(process.close)


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


@asynccontextmanager
async def _session(
    *, server: str, config: McpServerConfig, workspace: Path
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
            sandboxed_stdio(config=config, workspace=workspace) as (read, write, process),
            _ClientSession(read, write) as session,
        ):
            with anyio.fail_after(config.connect_timeout_s):
                await session.initialize()
            yield session, process


def _limit_text(crossed: str, connection: _Connection) -> str:
    assert connection.process is not None
    if crossed == "disk":
        connection.process.wait()  # killed: nothing writes while its additions are taken back
        error, _ = connection.process.quota_end("the MCP server's call")
        if error is not None:
            return f"the MCP server was stopped: {error}"
    return (
        f"the MCP server was stopped: {limit_message(crossed, connection.process.limits)}; "
        "what it wrote so far stays in the workspace (a rollback undoes it)"
    )


def _describe_error(exc: BaseException) -> str:
    """A one-line reason, unwrapping anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


class _Connection:
    def __init__(
        self, context: AbstractContextManager[Any], session: Any, process: SandboxProcess | None
    ) -> None:
        self.context = context
        self.session = session
        # A stdio server's sandbox (its limits are checked while calls run); None over HTTP.
        self.process = process
        self.dead = False

    def limit_crossed(self) -> str | None:
        """The sandbox limit a stdio server has crossed (its workspace quota), which also
        stops it; None while within its limits."""
        if self.process is None:
            return None
        crossed = self.process.check_limits()
        if crossed is not None:
            self.process.kill(crossed)
            self.dead = True
        return crossed


class _LimitCrossed(Exception):
    def __init__(self, message: str, crossed: str) -> None:
        super().__init__(message)
        self.error = (
            DiskQuotaExceeded(message) if crossed == "disk" else PermanentToolError(message)
        )


class McpConnections:
    """The MCP sessions of one task run, on one event loop (a blocking portal thread) that
    starts with the first session and stops in `close()` at the end of the job."""

    def __init__(self, *, task_id: Any, workspace: Path) -> None:
        self.task_id = task_id
        self.workspace = workspace
        self.servers = harness_config().mcp_servers
        self._portal_context: AbstractContextManager[Any] | None = None
        self._portal: Any = None
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        # server -> the last connection or call error seen by this run (for /ops/).
        self.errors: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------

    def _portal_started(self) -> Any:
        if self._portal is None:
            self._portal_context = start_blocking_portal()
            self._portal = self._portal_context.__enter__()
        return self._portal

    def _connect(self, server: str) -> _Connection:
        config = self.servers.get(server)
        if config is None:
            raise McpUnavailable(f"MCP server {server!r} is not configured in harness.yaml")
        portal = self._portal_started()
        context = portal.wrap_async_context_manager(
            _session(server=server, config=config, workspace=self.workspace)
        )
        try:
            session, process = context.__enter__()
        except TimeoutError:
            reason = f"MCP server {server!r} did not answer within {config.connect_timeout_s:g}s"
            self.errors[server] = reason
            raise McpUnavailable(reason, transient=True) from None
        except McpUnavailable as exc:
            self.errors[server] = str(exc)
            raise
        except BaseException as exc:
            reason = f"could not start MCP server {server!r}: {_describe_error(exc)}"
            self.errors[server] = reason
            # No sandbox on this machine will not fix itself; a server that is down may.
            raise McpUnavailable(
                reason, transient=not isinstance(exc, SandboxUnavailable)
            ) from None
        return _Connection(context, session, process)

    def _disconnect(self, connection: _Connection) -> None:
        with suppress(BaseException):
            connection.context.__exit__(None, None, None)

    def connection(self, server: str) -> _Connection:
        with self._lock:
            current = self._connections.get(server)
            if current is not None and not current.dead:
                return current
            if current is not None:
                self._disconnect(current)
                del self._connections[server]
            fresh = self._connect(server)
            self._connections[server] = fresh
            return fresh

    def close(self) -> None:
        """End every session (stdio servers are stopped) and the event loop."""
        with self._lock:
            for connection in self._connections.values():
                self._disconnect(connection)
            self._connections.clear()
            if self._portal_context is not None:
                with suppress(BaseException):
                    self._portal_context.__exit__(None, None, None)
            self._portal_context = self._portal = None

    # -- discovery ---------------------------------------------------------------------

    def list_tools(self, server: str) -> tuple[list[McpTool], list[str]]:
        """All of a server's tools (paginated) -> (tools, names skipped with the reason)."""
        connection = self.connection(server)
        tools: list[McpTool] = []
        skipped: list[str] = []
        cursor = None
        for _page in range(MAX_LIST_PAGES):
            try:
                result = self._portal.call(self._list_page, connection.session, cursor)
            except BaseException as exc:
                connection.dead = True
                reason = f"listing the tools of {server!r} failed: {_describe_error(exc)}"
                self.errors[server] = reason
                raise McpUnavailable(reason, transient=True) from None
            for item in result.tools:
                name = mcp_name(server, item.name)
                problem = None if TOOL_NAME.match(name) else "name not accepted by model APIs"
                problem = (
                    problem
                    or check_tool_schema(schema=item.input_schema, field="inputSchema")
                    or (
                        None
                        if item.output_schema is None
                        else check_tool_schema(schema=item.output_schema, field="outputSchema")
                    )
                )
                if problem:
                    skipped.append(f"{item.name[:80]}: {problem}")
                    continue
                annotations = (
                    item.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
                    if item.annotations is not None
                    else {}
                )
                tools.append(
                    McpTool(
                        server=server,
                        tool=item.name,
                        description=(item.description or "")[:MAX_DESCRIPTION_CHARS],
                        input_schema=item.input_schema,
                        annotations=annotations,
                    )
                )
            cursor = result.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS_PER_SERVER:
                break
        return tools[:MAX_TOOLS_PER_SERVER], skipped

    @staticmethod
    async def _list_page(session: Any, cursor: str | None) -> Any:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        return await session.list_tools(params=params)

    # -- calls -------------------------------------------------------------------------

    def fingerprinter(self, tool: McpTool) -> Callable[[ToolContext, Any], list[dict[str, Any]]]:
        """The call's target (tasks.fingerprint): the server's tool list and this tool's entry
        in it, as the server lists them now (a server that changed a tool after a review
        opened does not run it on that approval)."""

        def fingerprint(ctx: ToolContext, args: Any) -> list[dict[str, Any]]:
            target: dict[str, Any] = {"kind": "mcp", "key": tool.name}
            try:
                listed, _skipped = self.list_tools(tool.server)
            except McpUnavailable as exc:
                return [{**target, "unverified": str(exc)}]
            entries = [t.model_dump(mode="json") for t in listed]
            mine = next((e for e in entries if e["tool"] == tool.tool), None)
            return [
                {
                    **target,
                    "tool_list": canonical_hash(entries),
                    "schema": canonical_hash(mine) if mine is not None else None,
                }
            ]

        return fingerprint

    def caller(self, tool: McpTool, *, idempotent: bool) -> Callable[[ToolContext, Any], Any]:
        def call(ctx: ToolContext, args: JsonSchemaArgs) -> Any:
            return self.call(tool, ctx, args.arguments(), idempotent=idempotent)

        return call

    def _alive(self, connection: _Connection) -> bool:
        try:
            self._portal.call(self._ping, connection.session)
        except BaseException:
            return False
        return True

    @staticmethod
    async def _ping(session: Any) -> None:
        with anyio.fail_after(PING_TIMEOUT_S):
            await session.send_ping()

    def call(
        self, tool: McpTool, ctx: ToolContext, arguments: dict[str, Any], *, idempotent: bool
    ) -> Any:
        server = tool.server
        try:
            connection = self.connection(server)
            if not self._alive(connection):
                # Dead before this call was sent (a crashed stdio server): restart it, once.
                connection.dead = True
                self.errors[server] = "the server had stopped answering; restarted for a call"
                connection = self.connection(server)
        except McpUnavailable as exc:
            # Nothing was sent: another attempt cannot duplicate anything.
            raise TransientToolError(str(exc)) from None
        if connection.process is not None:
            # The quota is the workspace's, across calls: this call gets what is left.
            connection.process.quota_restart()
        read_timeout = max(ctx.timeout_s - TIMEOUT_MARGIN_S, ctx.timeout_s * 0.9)
        meta = {META_KEY: ctx.idempotency_key, CALL_ID_META_KEY: ctx.call_id}
        future = self._portal.start_task_soon(
            self._call_tool, connection.session, tool.tool, arguments, read_timeout, meta
        )
        try:
            result = self._wait(future, ctx, connection)
        except CancelledError:
            raise ToolError("stopped: the call was canceled", error_class="canceled") from None
        except _LimitCrossed as exc:
            self.errors[server] = str(exc)
            raise exc.error from None
        except BaseException as exc:
            raise self._call_failure(server, connection, exc, idempotent=idempotent) from None
        _show_content(ctx.output, result.content)
        self._quota_end(tool, connection, result)
        if result.is_error:
            raise PermanentToolError(
                f"{tool.name} reported an error: {content_text(result.content) or '(no text)'}"
            )
        return result_json(result)

    @staticmethod
    def _quota_end(tool: McpTool, connection: _Connection, result: Any) -> None:
        """After a stdio server answered: fail the call if it left the workspace past its
        quota (its limit check found it within just now: a late write) or the kernel refused
        a write at what was left of it."""
        if connection.process is None:
            return
        error, capped = connection.process.quota_end(tool.name)
        if error is not None:
            raise error
        if capped:
            said = f" ({content_text(result.content)[:200]})" if result.is_error else ""
            quota = connection.process.limits.disk_bytes // 1024**2
            raise DiskQuotaExceeded(
                f'disk quota reached (limits_hit: ["disk"]): {tool.name} wrote up to what was '
                f"left of the workspace's quota of {quota} MiB (harness.yaml sandbox.disk_mb) "
                f"and a write past it failed with 'File too large'{said}"
            )

    @staticmethod
    async def _call_tool(
        session: Any, name: str, arguments: dict[str, Any], timeout: float, meta: dict[str, Any]
    ) -> Any:
        return await session.call_tool(name, arguments, read_timeout_seconds=timeout, meta=meta)

    @staticmethod
    def _wait(future: Future, ctx: ToolContext, connection: _Connection) -> Any:
        """The call's result; a stop (cancel, lease lost, the harness's timeout) cancels it. A
        stdio server's sandbox limits are checked as it runs and once it answered: crossing
        one stops the server (it is restarted for the next call)."""
        checked = time.monotonic()
        while True:
            try:
                result = future.result(timeout=0.05)
                break
            except FutureTimeout:
                if ctx.stop.is_set():
                    future.cancel()
                    raise CancelledError() from None
                if time.monotonic() - checked >= LIMIT_CHECK_S:
                    checked = time.monotonic()
                    if (crossed := connection.limit_crossed()) is not None:
                        future.cancel()
                        raise _LimitCrossed(_limit_text(crossed, connection), crossed) from None
        if (crossed := connection.limit_crossed()) is not None:
            raise _LimitCrossed(_limit_text(crossed, connection), crossed)
        return result

    def _call_failure(
        self, server: str, connection: _Connection, exc: BaseException, *, idempotent: bool
    ) -> ToolError:
        reason = _describe_error(exc)
        if isinstance(exc, MCPError) and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
            # The server answered with an error (unknown tool, invalid params): permanent.
            return PermanentToolError(f"MCP server {server!r} refused the call: {exc.message}")
        if type(exc) is RuntimeError:
            # The SDK's own verdict on an answer (structured content against the tool's
            # outputSchema, an input request this client does not take): the server answered.
            return PermanentToolError(f"MCP server {server!r} answered unusably: {reason}")
        timed_out = isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT
        if timed_out and connection.process is not None:
            # A stdio server that let a call time out may be stuck in it for good, and would
            # time out every later call: it is killed now, with all it started, and the next
            # call starts a fresh one. (An HTTP server is shared; the SDK cancels the request.)
            connection.process.kill()
        if not timed_out or connection.process is not None:
            connection.dead = True
            self.errors[server] = reason
        what = "timed out" if timed_out else f"lost its connection ({reason})"
        if idempotent:
            # Safe to send again with the same idempotency key.
            return ToolError(
                f"MCP server {server!r} {what} during the call",
                error_class=TIMEOUT if timed_out else TRANSIENT,
            )
        return ToolError(
            f"MCP server {server!r} {what} during the call; the tool is not idempotent, so "
            "whether it took effect is unknown",
            error_class=UNKNOWN_OUTCOME,
        )


def _decoded(data: Any) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (ValueError, TypeError):
        return b""


def _show_content(output: CallOutput, blocks: list[Any]) -> None:
    """The content blocks of an answer, for the task page: text as text, an image as an
    image (a safe type, else a download), a resource link as a link (http(s) only, else its
    text), an embedded resource as its text or bytes."""
    for n, block in enumerate(blocks, start=1):
        kind = getattr(block, "type", "")
        if kind == "text":
            output.attach(name=f"text {n}", data=str(block.text))
        elif kind in ("image", "audio"):
            output.attach(
                name=f"{kind} {n}",
                data=_decoded(block.data),
                kind=OutputKind.IMAGE if kind == "image" else OutputKind.BINARY,
                media_type=str(block.mime_type),
            )
        elif kind == "resource_link":
            output.attach(
                name=f"link {n}",
                data=str(block.name or block.uri),
                kind=OutputKind.LINK,
                href=str(block.uri),
            )
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                output.attach(name=f"resource {n}", data=f"{resource.uri}\n{text}")
            else:
                output.attach(
                    name=f"resource {n}",
                    data=_decoded(getattr(resource, "blob", "")),
                    kind=OutputKind.BINARY,
                    media_type="application/octet-stream",
                )


# --- a task's MCP tools ---------------------------------------------------------------------


def mcp_tools_discover(
    *, connections: McpConnections, names: list[str]
) -> tuple[list[McpTool], list[dict[str, Any]]]:
    """List the servers a spec names -> (the tools it may use, one report per server for the
    `mcp_tools_listed` event). A tool named one by one that the server does not offer fails
    closed (McpUnavailable names it)."""
    chosen: list[McpTool] = []
    reports: list[dict[str, Any]] = []
    for server in mcp_servers_named(names):
        tools, skipped = connections.list_tools(server)
        patterns = [n for n in names if mcp_server_of(n) == server]
        offered = {t.name for t in tools}
        missing = [p for p in patterns if not p.endswith("*") and p not in offered]
        if missing:
            raise McpUnavailable(
                f"MCP server {server!r} does not offer {', '.join(missing)}; it offers: "
                + (", ".join(sorted(offered))[:1000] or "(no tools)")
            )
        mine = [t for t in tools if any(tool_pattern_matches(p, t.name) for p in patterns)]
        chosen.extend(mine)
        reports.append(
            {
                "server": server,
                "transport": connections.servers[server].transport,
                "tool_count": len(tools),
                "tools": [t.model_dump(mode="json") for t in mine],
                **({"skipped": skipped[:20]} if skipped else {}),
            }
        )
    return chosen, reports
