"""A tool whose argument schema a test changes between a recorded run and its replay: the
worker's environment picks the version (STAMP_SCHEMA=v2 renames `name` to `label`)."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict

from tasks.tools import ToolContext, tool

if os.environ.get("STAMP_SCHEMA") == "v2":

    class StampArgs(BaseModel):
        model_config = ConfigDict(extra="forbid")

        label: str

else:

    class StampArgs(BaseModel):  # type: ignore[no-redef]
        model_config = ConfigDict(extra="forbid")

        name: str


@tool(risk="read", timeout_s=5)
def stamp(ctx: ToolContext, args: StampArgs) -> dict:
    """Stamp a name (returns it)."""
    return {"stamped": args.model_dump()}
