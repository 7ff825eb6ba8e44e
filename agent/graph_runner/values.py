"""What the runner stores of a graph's values: JSON as the database takes it, text bounded
for events and results."""

from __future__ import annotations

import json
from typing import Any

TEXT_MAX_CHARS = 500


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def text(value: Any, limit: int = TEXT_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more]"
