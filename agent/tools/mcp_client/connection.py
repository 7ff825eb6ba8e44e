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

    def stopped_text(self, crossed: str) -> str:
        """What the call that found its server past `crossed` ends with (limit_text)."""
        assert self.process is not None
        return limit_text(crossed, self.process)


class LimitCrossed(Exception):
    def __init__(self, message: str, crossed: str) -> None:
        super().__init__(message)
        self.error = (
            DiskQuotaExceeded(message) if crossed == "disk" else PermanentToolError(message)
        )


def limit_text(crossed: str, process: SandboxProcess) -> str:
    if crossed == "disk":
        process.wait()  # killed: nothing writes while its additions are taken back
        error, _ = process.quota_end("the MCP server's call")
        if error is not None:
            return f"the MCP server was stopped: {error}"
    return (
        f"the MCP server was stopped: {limit_message(crossed, process.limits)}; "
        "what it wrote so far stays in the workspace (a rollback undoes it)"
    )


def quota_end_checked(process: SandboxProcess, tool: str, said: str = "") -> None:
    """After a stdio server answered a call of `tool`: DiskQuotaExceeded if it left the
    workspace past its quota (its additions are taken back; a late write its limit check
    missed) or the kernel refused a write at what was left of it (`said`: what the server
    answered, if it reported an error)."""
    error, capped = process.quota_end(tool)
    if error is not None:
        raise error
    if capped:
        quota = process.limits.disk_bytes // 1024**2
        raise DiskQuotaExceeded(
            f'disk quota reached (limits_hit: ["disk"]): {tool} wrote up to what was '
            f"left of the workspace's quota of {quota} MiB (harness.yaml sandbox.disk_mb) "
            f"and a write past it failed with 'File too large'{said}"
        )
