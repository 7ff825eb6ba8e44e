"""A migration as a team registers it in harness.yaml `migrations:` (used by the tests): the
pending ticket call gains the field the new schema requires."""

from __future__ import annotations

from typing import Any


def add_priority(*, state: dict[str, Any], drift: dict[str, Any]) -> dict[str, Any]:
    for call in state["pending"][state["next_call"] :]:
        call["args"].setdefault("priority", 3)
    for message in reversed(state["messages"]):
        if message["role"] == "assistant" and message.get("calls"):
            for call in message["calls"]:
                call["args"].setdefault("priority", 3)
            break
    return state


def broken(*, state: dict[str, Any], drift: dict[str, Any]) -> dict[str, Any]:
    """A migration with a bug: it raises."""
    raise RuntimeError("no priority table in this deploy")
