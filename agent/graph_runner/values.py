"""What the runner stores of a graph's values: JSON as the database takes it, text bounded
for events and results."""

from __future__ import annotations

import json
from typing import Any

TEXT_MAX_CHARS = 500
# A graph's answer, and what a replay gives back of a recorded model text or tool answer.
RESULT_MAX_CHARS = 5000


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def text(value: Any, limit: int = TEXT_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more]"


def full_text(key: str, value: Any, shown: str) -> dict[str, str]:
    """{key: the value's text up to RESULT_MAX_CHARS} when `shown` (its text as an event
    bounds it) is shorter, for a replay to give back whole; else {}."""
    whole = text(value, RESULT_MAX_CHARS)
    return {key: whole} if whole != shown else {}
