"""How a tool says a rollback undoes one of its calls (`@tool(compensate=Compensate(...))`).

    @tool(risk="external", side_effect=True,
          compensate=Compensate("close_ticket", lambda args, result: {"key": result["key"]}))
    def open_ticket(ctx, args: OpenTicketArgs) -> dict: ...

`tool` names the compensating tool, an ordinary registered tool (reviewed, retried and
recorded like any call); `args(arguments, result)` derives its arguments from the original
call's arguments (a dict, as recorded in the ledger) and its recorded result. It runs in the
web process for the rollback preview and in the worker for the rollback, so it must be a pure
function of those two: no I/O. An exception it raises (a KeyError on a result without the key)
is reported with the call as "could not be computed", never a server error. The compensating
tool must be idempotent in effect: a rollback runs it under a key derived from the original
call's, so a crash mid-rollback never runs it twice, but a tracker that closes a closed ticket
should say so rather than fail.

For a tool whose calls cannot be undone, `@tool(reversible=False)`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CompensateArgs = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass(frozen=True)
class Compensate:
    """The compensating tool's name, and its arguments from (arguments, result)."""

    tool: str
    args: CompensateArgs

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool:
            raise TypeError("Compensate(tool=...) names a registered tool")
        if not callable(self.args):
            raise TypeError("Compensate(args=...) is a function (arguments, result) -> dict")
