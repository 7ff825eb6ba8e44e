"""The adapter's kind and the plain values the harness makes of what the SDK hands it: text
for the timeline (clipped), JSON, a field of an SDK item, a pending approval (Approval)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

KIND = "openai-agents"
TEXT_MAX_CHARS = 500


def short_text(value: Any, limit: int = TEXT_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more]"


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def arguments_of(text: Any) -> dict[str, Any]:
    """A call's arguments (the SDK's JSON text, or its parsed dict) as the ledger keeps them."""
    if isinstance(text, dict):
        return jsonable(text)
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {"_raw": str(text)[:2000]}
    return value if isinstance(value, dict) else {"value": value}


@dataclasses.dataclass
class Approval:
    """One pending approval of the RunState, as the harness sees it."""

    item: Any
    sdk_call_id: str
    tool: str
    arguments: dict[str, Any]
    hosted: bool  # a hosted MCP tool's approval request (not a local function tool)


def approval_of(item: Any) -> Approval:
    raw = item.raw_item
    hosted = field(raw, "type") == "mcp_approval_request"
    name = getattr(item, "tool_name", None) or field(raw, "name") or "tool"
    if hosted and field(raw, "server_label"):
        name = f"{field(raw, 'server_label')}__{field(raw, 'name')}"
    call_id = field(raw, "call_id") or field(raw, "id") or name
    return Approval(
        item=item,
        sdk_call_id=str(call_id),
        tool=str(name)[:100],
        arguments=arguments_of(field(raw, "arguments")),
        hosted=hosted,
    )


def call_arguments(arguments: Any) -> Any:
    """A function call's arguments (the SDK's JSON text) as JSON; text that is not JSON as
    it is."""
    try:
        return json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return arguments
