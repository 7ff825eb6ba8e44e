"""Template filters every template has (registered as template builtins in settings): JSON
values shown as JSON, never as Python reprs (`{"a": false}`, not `{'a': False}`), and the
line classes of a unified diff, and spans of seconds in the unit that reads best."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


def _jsonable(value: Any) -> Any:
    """Pydantic models (agent messages, proposed calls) as their JSON; anything else as text."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else str(value)


@register.filter
def as_json(value: Any) -> str:
    """Indented JSON, for `<pre>` blocks (arguments, rules, audit before/after)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable)


@register.filter
def as_json_line(value: Any) -> str:
    """One-line JSON, for table cells (truncate after this filter, not before)."""
    return json.dumps(value, ensure_ascii=False, default=_jsonable)


@register.filter
def diff_lines(text: str) -> list[tuple[str, str]]:
    """A unified diff as (CSS class, line) pairs, for colouring."""
    return [(diff_class(line), line) for line in (text or "").splitlines()]


@register.filter
def diff_class(line: str) -> str:
    """CSS class for one line of a unified diff."""
    if line.startswith(("+++", "---")):
        return "diff-file"
    if line.startswith("@@"):
        return "diff-hunk"
    if line.startswith("+"):
        return "diff-add"
    if line.startswith("-"):
        return "diff-del"
    return ""


_UNITS = ((86400, "d"), (3600, "h"), (60, "min"))


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds in the largest unit they fill: `45 s`, `12.5 min`, `3.2 h`, `2.1 d` ("—" for
    None)."""
    if seconds is None:
        return "—"
    for size, unit in _UNITS:
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s" if abs(seconds) >= 10 else f"{seconds:.1f} s"
