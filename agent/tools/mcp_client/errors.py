"""The MCP client's errors: McpUnavailable (a server could not be started, reached or
listed) and the one-line reason of any exception it reports."""

from __future__ import annotations


class McpUnavailable(Exception):
    """A server could not be started, reached or listed. `transient`: trying again later may
    help (it did not answer); otherwise the configuration or the server's tool list is wrong."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def describe_error(exc: BaseException) -> str:
    """A one-line reason, unwrapping anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]
