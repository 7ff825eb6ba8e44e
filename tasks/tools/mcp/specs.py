"""An MCP tool as a registry entry: its policy from its annotations, its arguments checked
against the server's inputSchema."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from harness_base.config import harness_config
from tasks.agent_state import McpTool
from tasks.json_schema import json_schema_check, json_schema_validator
from tasks.tools.registry import PermanentToolError, Risk, ToolContext, ToolSpec

MAX_DESCRIPTION_CHARS = 4000
# Recorded in every checkpoint of the task: keep each tool's schema bounded.
MAX_SCHEMA_CHARS = 32 * 1024


# MCP's defaults for a tool that declares no annotations.
MCP_DEFAULT_HINTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}


def _hint(annotations: dict[str, Any], key: str, default: bool) -> bool:
    value = annotations.get(key)
    return value if isinstance(value, bool) else default


def tool_policy(annotations: dict[str, Any]) -> tuple[Risk, bool, bool]:
    """(risk, side_effect, idempotent) from a tool's annotations, MCP's defaults filling the
    gaps: a tool that declares nothing is destructive, not idempotent and open-world."""

    def hint(key: str) -> bool:
        return _hint(annotations, key, MCP_DEFAULT_HINTS[key])

    if hint("readOnlyHint"):
        return "read", False, True
    idempotent = hint("idempotentHint")
    if hint("destructiveHint"):
        return "destructive", True, idempotent
    if hint("openWorldHint"):
        return "external", True, idempotent
    return "write", True, idempotent


# --- arguments: the server's inputSchema ------------------------------------------------------


class JsonSchemaArgs(BaseModel):
    """Arguments checked against a JSON schema instead of pydantic fields; subclassed per tool
    (`args_model_for`). Errors name the failing argument, as pydantic errors do."""

    model_config = ConfigDict(extra="allow")
    input_schema: ClassVar[dict[str, Any]] = {}

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        errors = sorted(
            json_schema_validator(schema=cls.input_schema).iter_errors(data),
            key=lambda e: list(e.path),
        )
        if errors:
            parts = []
            for error in errors[:3]:
                where = ".".join(str(p) for p in error.absolute_path) or "arguments"
                parts.append(f"{where}: {error.message[:300]}")
            raise PydanticCustomError("json_schema", "{detail}", {"detail": "; ".join(parts)})
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return cls.input_schema

    def arguments(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def args_model_for(tool: McpTool) -> type[JsonSchemaArgs]:
    schema = tool.input_schema or {"type": "object"}
    return type(f"{tool.name}_args", (JsonSchemaArgs,), {"input_schema": schema})


def check_tool_schema(*, schema: Any, field: str) -> str | None:
    """Why a server's `inputSchema` / `outputSchema` (`field`) cannot be used, if it cannot: a
    tool with such a schema is not offered (the listing event names it and the reason)."""
    if not isinstance(schema, dict):
        return f"{field} is not an object"
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
        return f"{field} is larger than {MAX_SCHEMA_CHARS} characters"
    try:
        json_schema_check(schema=schema)
    except ValueError as exc:
        return f"{field}: {str(exc)[:300]}"
    return None


# --- tool specs -------------------------------------------------------------------------------


def _not_connected(ctx: ToolContext, args: Any) -> Any:
    raise PermanentToolError("this MCP tool is not connected in this process")


def mcp_tool_spec(
    tool: McpTool, *, call: Callable[[ToolContext, Any], Any] | None = None
) -> ToolSpec:
    """The registry entry for a recorded MCP tool. `call` is the run's connection to the
    server; without it (a web request looking at a review) the spec describes the tool only."""
    risk, side_effect, idempotent = tool_policy(tool.annotations)
    timeout_s = harness_config().timeouts.tool_s
    return ToolSpec(
        name=tool.name,
        func=call or _not_connected,
        args_model=args_model_for(tool),
        description=tool.description,
        risk=risk,
        side_effect=side_effect,
        idempotent=idempotent,
        timeout_s=timeout_s,
        recovery="retry" if risk in ("read", "external") else "rollback",
        server=tool.server,
        input_schema=tool.input_schema or {"type": "object"},
        annotations=dict(tool.annotations),
    )


def recorded_tool(tools: Iterable[dict[str, Any]], name: str) -> ToolSpec | None:
    """A tool from recorded definitions (the `mcp_tools_listed` events of a task), described
    but not callable: for the review page and for checking an edited call's arguments."""
    for item in tools:
        tool = McpTool.model_validate(item)
        if tool.name == name:
            return mcp_tool_spec(tool)
    return None
