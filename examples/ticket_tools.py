"""A worked example of plugging your own tools into the harness without touching its code.

Enable it with `HARNESS_TOOL_MODULES=examples.ticket_tools` and name the tools in a task's
`tools` list. The "tracker" here is a JSON-lines file in the workspace so the example runs
anywhere; a real tool would call your tracker's API with `ctx.idempotency_key`.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field

from tasks.tools import PermanentToolError, ToolContext, tool

TRACKER = "tickets.jsonl"


class OpenTicketArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=3, max_length=120)
    severity: int = Field(ge=1, le=4, description="1 = outage … 4 = cosmetic")


class TicketLookupArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str


def _tickets(ctx: ToolContext) -> list[dict]:
    path = ctx.workspace / TRACKER
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _preview(ctx: ToolContext, args: OpenTicketArgs) -> str:
    return f"Open ticket (severity {args.severity}): {args.title}"


# Trackers rate-limit: up to 4 attempts, 2 s apart at first (doubling), for transient errors.
@tool(
    risk="external",
    side_effect=True,
    idempotent=True,
    timeout_s=15,
    preview=_preview,
    retry={"max_attempts": 4, "initial_s": 2},
)
def open_ticket(ctx: ToolContext, args: OpenTicketArgs) -> dict:
    """Open a ticket in the team tracker. Returns its key."""
    for ticket in _tickets(ctx):
        # The call_id-derived key makes a retried or resumed call return the same ticket.
        if ticket["idempotency_key"] == ctx.idempotency_key:
            return {"key": ticket["key"], "created": False}
    key = f"OPS-{len(_tickets(ctx)) + 1}"
    with open(ctx.workspace / TRACKER, "a") as fh:
        fh.write(
            json.dumps(
                {
                    "key": key,
                    "title": args.title,
                    "severity": args.severity,
                    "idempotency_key": ctx.idempotency_key,
                }
            )
            + "\n"
        )
    return {"key": key, "created": True}


@tool(risk="read", timeout_s=5)
def ticket_status(ctx: ToolContext, args: TicketLookupArgs) -> dict:
    """Look a ticket up by key."""
    for ticket in _tickets(ctx):
        if ticket["key"] == args.key:
            return {"key": args.key, "title": ticket["title"], "status": "open"}
    raise PermanentToolError(f"no ticket {args.key}")
