"""Argument schemas in a drift (tasks.drift): the fields of a JSON Schema, one tool's schema
out of an MCP server's tool list, and arguments validated against a schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError


def schema_fields(schema: Any) -> tuple[set[str], set[str]]:
    if not isinstance(schema, Mapping):
        return set(), set()
    return set(schema.get("properties") or {}), set(schema.get("required") or [])


def mcp_tool_schema(server_list: Any, tool: str) -> Any:
    """One tool's input schema out of an MCP server's tool list (None: not listed)."""
    entries = server_list.get("tools") if isinstance(server_list, Mapping) else server_list
    for entry in entries or []:
        if isinstance(entry, Mapping) and entry.get("name") == tool:
            for key in ("inputSchema", "input_schema", "parameters", "schema"):
                if key in entry:
                    return entry[key]
            return {}
    return None


def arguments_check(schema: Any, arguments: Any) -> tuple[bool | None, list[dict[str, str]]]:
    """`arguments` against a JSON Schema: (valid, [{field: "arguments.<path>", message}]);
    (None, []) when there is no usable schema."""
    if not isinstance(schema, Mapping):
        return None, []
    try:
        validator = Draft202012Validator(dict(schema))
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except SchemaError:
        return None, []
    found = []
    for error in errors[:20]:
        path = [str(p) for p in error.absolute_path]
        if error.validator == "required" and isinstance(error.validator_value, list):
            missing = [n for n in error.validator_value if n not in (error.instance or {})]
            for name in missing:
                found.append(
                    {"field": ".".join(["arguments", *path, name]), "message": "Field required"}
                )
            continue
        found.append({"field": ".".join(["arguments", *path]), "message": error.message[:300]})
    return not found, found


def parts_changed(old: Any, new: Any, *, prefix: str = "", depth: int = 4) -> list[str]:
    """The dotted paths at which two bodies differ (an SDK agent's definition: its
    instructions, a tool, its output type...), down to a tool's argument schema, which is
    named whole."""
    if old == new:
        return []
    both = isinstance(old, Mapping) and isinstance(new, Mapping)
    if not both or depth == 0 or "properties" in old or "properties" in new:
        return [prefix or "(all)"]
    return [
        part
        for key in sorted(set(old) | set(new), key=str)
        for part in parts_changed(
            old.get(key),
            new.get(key),
            prefix=f"{prefix}.{key}" if prefix else str(key),
            depth=depth - 1,
        )
    ]
