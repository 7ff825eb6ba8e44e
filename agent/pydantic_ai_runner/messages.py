"""What a run stores as JSON: the agent's message history (ModelMessagesTypeAdapter:
messages_dump, messages_load; MessagesDumped, a run's dump kept between its checkpoints) and
any value a tool or the agent returns (jsonable)."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_core import to_jsonable_python


def messages_dump(messages: list[Any]) -> list[Any]:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


# The last messages are dumped again at every checkpoint: Pydantic AI completes the request
# it is building in place (its instructions, parts); an earlier message it changes is a new
# object (dataclasses.replace), so it is dumped again too.
REDUMP = 4


class MessagesDumped:
    """A run's message history as JSON, each message dumped once (the same message object
    keeps its dump), so a checkpoint costs the new messages, not the whole history."""

    def __init__(self) -> None:
        self.dumped: list[tuple[Any, Any]] = []

    def __call__(self, messages: list[Any]) -> list[Any]:
        known = self.dumped
        limit = min(len(known), max(len(messages) - REDUMP, 0))
        keep = 0
        while keep < limit and known[keep][0] is messages[keep]:
            keep += 1
        fresh = messages[keep:]
        self.dumped = known[:keep] + list(zip(fresh, messages_dump(fresh), strict=True))
        return [dumped for _message, dumped in self.dumped]


def messages_load(data: list[Any]) -> list[Any]:
    return ModelMessagesTypeAdapter.validate_python(data)


def jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(to_jsonable_python(value), ensure_ascii=False))
    except Exception:  # anything a tool returns: kept as its text
        return str(value)
