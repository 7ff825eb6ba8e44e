"""A worked example of plugging your own tools into the harness without touching its code.

Enable it with `HARNESS_TOOL_MODULES=examples.ticket_tools` and name the tools in a task's
`tools` list. The "tracker" is a JSON file outside every workspace, so a rollback's file
restore does not touch it (an effect in the world, as a real tracker's tickets are): its path
is `HARNESS_EXAMPLE_TRACKER`, by default `tracker.json` in the harness's data directory. A
real tool would call your tracker's API with `ctx.idempotency_key`.

`open_ticket` declares its compensation: a rollback past it runs `close_ticket` on the ticket
it opened (with the key from its result). `send_email` declares that it cannot be undone.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field

from tasks.tools import Compensate, PermanentToolError, ToolContext, tool

TRACKER_ENV = "HARNESS_EXAMPLE_TRACKER"


class OpenTicketArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=3, max_length=120)
    severity: int = Field(ge=1, le=4, description="1 = outage … 4 = cosmetic")


class TicketLookupArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=40)


class SendEmailArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str = Field(min_length=3, max_length=200, pattern=r"^[^@\s]+@[^@\s]+$")
    subject: str = Field(min_length=1, max_length=200)
    body: str = Field(default="", max_length=10_000)


def tracker_path() -> Path:
    return Path(os.environ.get(TRACKER_ENV) or settings.DATA_DIR / "tracker.json")


@contextmanager
def tracker() -> Iterator[dict[str, Any]]:
    """The tracker's contents, locked against other workers for the block, written back
    atomically (a temporary file renamed over it) when the block ends without an error."""
    path = tracker_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        data.setdefault("tickets", [])
        data.setdefault("outbox", [])
        before = json.dumps(data, sort_keys=True)
        yield data
        if json.dumps(data, sort_keys=True) != before:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)


def _ticket(data: dict[str, Any], key: str) -> dict[str, Any]:
    for ticket in data["tickets"]:
        if ticket["key"] == key:
            return ticket
    raise PermanentToolError(f"no ticket {key}")


def _preview(ctx: ToolContext, args: OpenTicketArgs) -> str:
    return f"Open ticket (severity {args.severity}): {args.title}"


@tool(risk="external", side_effect=True, idempotent=True, timeout_s=15)
def close_ticket(ctx: ToolContext, args: TicketLookupArgs) -> dict:
    """Close a ticket by key. Closing a closed ticket changes nothing and says so."""
    with tracker() as data:
        ticket = _ticket(data, args.key)
        if ticket["status"] == "closed":
            return {"key": args.key, "closed": False, "already_closed": True}
        ticket["status"] = "closed"
        ticket["closed_by"] = ctx.idempotency_key
    return {"key": args.key, "closed": True}


# Trackers rate-limit: up to 4 attempts, 2 s apart at first (doubling), for transient errors.
# A rollback past a call closes the ticket it opened.
@tool(
    risk="external",
    side_effect=True,
    idempotent=True,
    timeout_s=15,
    preview=_preview,
    retry={"max_attempts": 4, "initial_s": 2},
    compensate=Compensate("close_ticket", lambda args, result: {"key": result["key"]}),
)
def open_ticket(ctx: ToolContext, args: OpenTicketArgs) -> dict:
    """Open a ticket in the team tracker. Returns its key."""
    with tracker() as data:
        for ticket in data["tickets"]:
            # The call_id-derived key makes a retried or resumed call return the same ticket.
            if ticket["idempotency_key"] == ctx.idempotency_key:
                return {"key": ticket["key"], "created": False}
        key = f"OPS-{len(data['tickets']) + 1}"
        data["tickets"].append(
            {
                "key": key,
                "title": args.title,
                "severity": args.severity,
                "status": "open",
                "idempotency_key": ctx.idempotency_key,
            }
        )
    return {"key": key, "created": True}


@tool(risk="read", timeout_s=5)
def ticket_status(ctx: ToolContext, args: TicketLookupArgs) -> dict:
    """Look a ticket up by key."""
    with tracker() as data:
        ticket = _ticket(data, args.key)
    return {"key": args.key, "title": ticket["title"], "status": ticket["status"]}


# Mail once sent stays sent: a rollback lists it under "cannot be undone".
@tool(risk="external", side_effect=True, idempotent=True, timeout_s=15, reversible=False)
def send_email(ctx: ToolContext, args: SendEmailArgs) -> dict:
    """Send an email (to the tracker's outbox in this example). Cannot be unsent."""
    with tracker() as data:
        for mail in data["outbox"]:
            if mail["idempotency_key"] == ctx.idempotency_key:
                return {"sent": False, "id": mail["id"]}
        mail_id = f"mail-{len(data['outbox']) + 1}"
        data["outbox"].append(
            {**args.model_dump(), "id": mail_id, "idempotency_key": ctx.idempotency_key}
        )
    return {"sent": True, "id": mail_id}
