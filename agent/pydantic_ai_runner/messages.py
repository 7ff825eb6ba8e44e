"""What a run stores as JSON: the agent's message history (ModelMessagesTypeAdapter:
messages_dump, messages_load) and any value a tool or the agent returns (jsonable)."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_core import to_jsonable_python


def messages_dump(messages: list[Any]) -> list[Any]:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def messages_load(data: list[Any]) -> list[Any]:
    return ModelMessagesTypeAdapter.validate_python(data)


def jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(to_jsonable_python(value), ensure_ascii=False))
    except Exception:  # anything a tool returns: kept as its text
        return str(value)
