"""The sessions of one task run (McpSessions, the base of McpConnections): one per server,
opened on first use on the run's event loop (a blocking portal thread), reopened when found
dead, all closed with the loop at the end of the job; a start that fails says why."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal

from agent.tools.mcp_client.connection import Connection
from agent.tools.mcp_client.errors import McpUnavailable, describe_error
from agent.tools.mcp_client.launch import Started
from agent.tools.mcp_client.session import mcp_session
from agent.tools.mcp_client.start_failures import start_failure
from agent.tools.sandbox import SandboxUnavailable
from harness_base.config import harness_config

PING_TIMEOUT_S = 5.0


class McpSessions:
    """McpConnections' sessions and their lifecycle: one per server, on one event loop (a
    blocking portal thread) that starts with the first session and stops in `close()`."""

    def __init__(self, *, task_id: Any, workspace: Path) -> None:
        self.task_id = task_id
        self.workspace = workspace
        self.servers = harness_config().mcp_servers
        self._portal_context: AbstractContextManager[Any] | None = None
        self._portal: Any = None
        self._connections: dict[str, Connection] = {}
        self._lock = threading.Lock()
        # server -> the last connection or call error seen by this run (for /ops/).
        self.errors: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------

    def _portal_started(self) -> Any:
        if self._portal is None:
            self._portal_context = start_blocking_portal()
            self._portal = self._portal_context.__enter__()
        return self._portal

    def _connect(self, server: str) -> Connection:
        config = self.servers.get(server)
        if config is None:
            raise McpUnavailable(f"MCP server {server!r} is not configured in harness.yaml")
        portal = self._portal_started()
        started = Started() if config.command is not None else None
        context = portal.wrap_async_context_manager(
            mcp_session(server=server, config=config, workspace=self.workspace, started=started)
        )
        try:
            session, process = context.__enter__()
        except TimeoutError:
            reason = f"MCP server {server!r} did not answer within {config.connect_timeout_s:g}s"
            error = start_failure(server, started, reason)
            self.errors[server] = str(error)
            raise error from None
        except McpUnavailable as exc:
            self.errors[server] = str(exc)
            raise
        except SandboxUnavailable as exc:
            # No sandbox on this machine will not fix itself.
            reason = f"could not start MCP server {server!r}: {describe_error(exc)}"
            self.errors[server] = reason
            raise McpUnavailable(reason) from None
        except BaseException as exc:
            # A server that is down may come up; one whose command cannot start will not.
            reason = f"could not start MCP server {server!r}: {describe_error(exc)}"
            error = start_failure(server, started, reason)
            self.errors[server] = str(error)
            raise error from None
        return Connection(context, session, process, started)

    def _disconnect(self, connection: Connection) -> None:
        with suppress(BaseException):
            connection.context.__exit__(None, None, None)

    def connection(self, server: str) -> Connection:
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

    def _alive(self, connection: Connection) -> bool:
        try:
            self._portal.call(self._ping, connection.session)
        except BaseException:
            return False
        return True

    @staticmethod
    async def _ping(session: Any) -> None:
        with anyio.fail_after(PING_TIMEOUT_S):
            await session.send_ping()
