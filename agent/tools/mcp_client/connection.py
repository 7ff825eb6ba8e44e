"""One open session of a run (Connection) and the sandbox limits its stdio server may cross
while a call runs: the check, the stop, and the error the call ends with."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from agent.tools.mcp_client.launch import Started
from agent.tools.quota import DiskQuotaExceeded
from agent.tools.sandbox import SandboxProcess, limit_message
from tasks.tools.registry import PermanentToolError


class Connection:
    def __init__(
        self,
        context: AbstractContextManager[Any],
        session: Any,
        process: SandboxProcess | None,
        started: Started | None = None,
    ) -> None:
        self.context = context
        self.session = session
        # A stdio server's stderr (its last lines explain a crash).
        self.started = started
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


class LimitCrossed(Exception):
    def __init__(self, message: str, crossed: str) -> None:
        super().__init__(message)
        self.error = (
            DiskQuotaExceeded(message) if crossed == "disk" else PermanentToolError(message)
        )


def limit_text(crossed: str, connection: Connection) -> str:
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
