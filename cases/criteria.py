"""What counts as passing a case (issue #31): checks on the replay's final answer, its files,
the tools it called, its cost and steps. Bounded like every input (THREATS.md)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_ITEMS = 200
MAX_TEXT = 20_000
_SHA256 = re.compile(r"[0-9a-f]{64}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FinalCheck(_Strict):
    # The final answer equals this text (None: any answer).
    equals: str | None = Field(default=None, max_length=MAX_TEXT)
    # ...and contains each of these.
    contains: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)


class CaseCriteria(_Strict):
    final: FinalCheck = Field(default_factory=FinalCheck)
    # Paths that must exist in the replay's final workspace.
    files_exist: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    # {path: sha256 hex of the content the file must have}.
    files_match: dict[str, str] = Field(default_factory=dict, max_length=10_000)
    # Tools the replay must call (successfully), and tools it must not call.
    tools_called: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    tools_not_called: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    max_cost_usd: float | None = Field(default=None, ge=0, le=1_000_000)
    max_steps: int | None = Field(default=None, ge=0, le=100_000)

    @field_validator("files_match")
    @classmethod
    def _hashes(cls, value: dict[str, str]) -> dict[str, str]:
        for path, digest in value.items():
            if not _SHA256.fullmatch(digest):
                raise ValueError(f"{path!r}: a sha256 hex digest of the content is expected")
        return value


def criteria_default(recording: dict[str, Any]) -> CaseCriteria:
    """Passing, unless said otherwise: the recorded final answer, the recorded final files,
    every tool the recording called with success, no more steps or cost than recorded."""
    return CaseCriteria(
        final=FinalCheck(equals=recording.get("final") or None),
        files_match=dict(recording.get("files") or {}),
        tools_called=sorted(
            {c["tool"] for c in recording.get("calls", []) if c["status"] == "succeeded"}
        ),
        max_steps=recording.get("steps_used"),
        max_cost_usd=recording.get("cost_usd"),
    )
