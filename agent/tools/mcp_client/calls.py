"""Calling a tool (McpToolCalls, part of McpConnections): the call id in `_meta`, the
server's sandbox limits checked while the call runs, the answer shown and bounded by the
workspace quota, and every failure classified (refused, unusable, timed out, connection lost:
transient for an idempotent tool, an unknown outcome otherwise)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from mcp import MCPError

from agent.retry import TIMEOUT, TRANSIENT, UNKNOWN_OUTCOME
from agent.tools.mcp_client.connection import (
    Connection,
    LimitCrossed,
    quota_end_checked,
)
from agent.tools.mcp_client.content import progress_writer, show_content
from agent.tools.mcp_client.errors import McpUnavailable, describe_error
from agent.tools.mcp_client.sessions import McpSessions
from tasks.agent_state import McpTool
from tasks.tools.mcp import content_media, content_text, result_json
from tasks.tools.registry import PermanentToolError, ToolContext, ToolError, TransientToolError

META_KEY = "agent-harness/idempotency_key"
CALL_ID_META_KEY = "agent-harness/call_id"
# How often a running call checks its stdio server's sandbox limits (the workspace quota).
LIMIT_CHECK_S = 1.0
# The SDK's own read timeout stops a call this much before the harness's tool timeout, so the
# call ends with a classified error (timeout / unknown outcome) instead of being abandoned.
TIMEOUT_MARGIN_S = 0.5
# JSON-RPC error codes the SDK's client raises itself (mcp_types.jsonrpc).
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001


class McpToolCalls(McpSessions):
    """McpConnections' calls: `call`, with its wait, its limits and its failures."""

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
            if not exc.transient:
                # Its command cannot start (or it is configured wrongly): no retry helps.
                raise ToolError(str(exc), error_class="mcp_unavailable") from None
            # Nothing was sent: another attempt cannot duplicate anything.
            raise TransientToolError(str(exc)) from None
        if connection.process is not None:
            # The quota is the workspace's, across calls: this call gets what is left.
            connection.process.quota_restart()
        read_timeout = max(ctx.timeout_s - TIMEOUT_MARGIN_S, ctx.timeout_s * 0.9)
        meta = {META_KEY: ctx.idempotency_key, CALL_ID_META_KEY: ctx.call_id}
        future = self._portal.start_task_soon(
            self._call_tool,
            connection.session,
            tool.tool,
            arguments,
            read_timeout,
            meta,
            progress_writer(ctx.output),
        )
        try:
            result = self._wait(future, ctx, connection)
        except CancelledError:
            raise ToolError("stopped: the call was canceled", error_class="canceled") from None
        except LimitCrossed as exc:
            self.errors[server] = str(exc)
            raise exc.error from None
        except BaseException as exc:
            raise self._call_failure(server, connection, exc, idempotent=idempotent) from None
        show_content(ctx.output, result.content)
        ctx.media.extend(content_media(result.content))
        self._quota_end(tool, connection, result)
        if result.is_error:
            raise PermanentToolError(
                f"{tool.name} reported an error: {content_text(result.content) or '(no text)'}"
            )
        return result_json(result)

    @staticmethod
    def _quota_end(tool: McpTool, connection: Connection, result: Any) -> None:
        """After a stdio server answered: fail the call if it left the workspace past its
        quota (its limit check found it within just now: a late write) or the kernel refused
        a write at what was left of it."""
        if connection.process is None:
            return
        said = f" ({content_text(result.content)[:200]})" if result.is_error else ""
        quota_end_checked(connection.process, tool.name, said)

    @staticmethod
    async def _call_tool(
        session: Any,
        name: str,
        arguments: dict[str, Any],
        timeout: float,
        meta: dict[str, Any],
        progress: Callable[..., Any],
    ) -> Any:
        # A progress callback makes the SDK send a progressToken: the server's progress
        # notifications for this call arrive there.
        return await session.call_tool(
            name, arguments, read_timeout_seconds=timeout, meta=meta, progress_callback=progress
        )

    @staticmethod
    def _wait(future: Future, ctx: ToolContext, connection: Connection) -> Any:
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
                        raise LimitCrossed(connection.stopped_text(crossed), crossed) from None
        if (crossed := connection.limit_crossed()) is not None:
            raise LimitCrossed(connection.stopped_text(crossed), crossed)
        return result

    def _call_failure(
        self, server: str, connection: Connection, exc: BaseException, *, idempotent: bool
    ) -> ToolError:
        reason = describe_error(exc)
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
        if not timed_out and connection.started is not None:
            lines = connection.started.stderr.lines()[-5:]
            if lines:
                what += "; its last stderr lines: " + " | ".join(lines)
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
