"""MCP servers as tool sources (harness.yaml `mcp_servers`, DESIGN §6).

Each server's tools join a task as `<server>__<tool>`, with the server's `inputSchema` as the
argument schema (checked with jsonschema, its patterns on RE2: tasks/json_schema.py, before
policy and review) and its description. A spec
names them in `tools` one by one or all at once with `<server>__*`. The tools a task may use
are listed when it starts and recorded in its first checkpoint (`AgentState.mcp_tools`), so a
resumed task sees the same tools.

Annotations set the policy, with MCP's own defaults for a tool that declares nothing (not
read-only, destructive, not idempotent, open-world): `readOnlyHint` -> risk `read`;
`destructiveHint` -> `destructive`; otherwise `openWorldHint` -> `external`, else `write`.
`idempotentHint` (or read-only) makes a call safe to retry after a transient error or a crash;
any other interrupted call becomes an unknown-outcome review. Operators override per tool with
review rules (`tool: tickets__close`), as for every tool. Annotations are a server's hints: they
can only be trusted as far as the server is (THREATS.md: servers are configured by an admin).

This module describes tools and is cheap to import (web requests use it for review pages);
talking to servers is agent/tools/mcp_client/, which loads the MCP SDK.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from harness_base.config import harness_config
from tasks.agent_state import McpTool, MediaPart
from tasks.json_schema import json_schema_check, json_schema_validator
from tasks.tools.registry import PermanentToolError, Risk, ToolContext, ToolSpec

SEPARATOR = "__"
# What every model API accepts as a function name.
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_RESULT_CHARS = 64 * 1024
MAX_DESCRIPTION_CHARS = 4000
# Recorded in every checkpoint of the task: keep each tool's schema bounded.
MAX_SCHEMA_CHARS = 32 * 1024
# An embedded text resource's text, as the model reads it.
MAX_EMBEDDED_TEXT_CHARS = 8000
# Images passed to the model in its native form: each at most this much base64, this many
# per result (a bigger or further one is described only).
MAX_MEDIA_BYTES = 1024 * 1024
MAX_MEDIA_PER_RESULT = 4
MAX_REFS = 50
MODEL_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


# --- names ------------------------------------------------------------------------------------


def mcp_name(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


def mcp_server_of(name: str) -> str | None:
    """The configured server a tool name (or `<server>__*`) belongs to, if any."""
    server, sep, _rest = name.partition(SEPARATOR)
    if sep and server in harness_config().mcp_servers:
        return server
    return None


def tool_pattern_matches(pattern: str, name: str) -> bool:
    if pattern.endswith(SEPARATOR + "*"):
        return name.startswith(pattern[:-1])
    return pattern == name


# --- annotations -> policy --------------------------------------------------------------------


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


# --- results ----------------------------------------------------------------------------------


def _clip(text: str) -> str:
    if len(text) > MAX_RESULT_CHARS:
        return text[:MAX_RESULT_CHARS] + f"… [truncated {len(text) - MAX_RESULT_CHARS} chars]"
    return text


def _b64_size(data: Any) -> int:
    text = str(data or "")
    return max(0, len(text) * 3 // 4 - text[-2:].count("="))


def content_ref(block: Any) -> dict[str, Any]:
    """What a non-text content block is, for the record (events, the ledger) and the model:
    its type, name, MIME type, URI and size, whichever it has. Never its data."""
    kind = str(getattr(block, "type", "content"))
    ref: dict[str, Any] = {"type": kind}
    if kind in ("image", "audio"):
        ref |= {"mime_type": block.mime_type, "size": _b64_size(block.data)}
    elif kind == "resource_link":
        ref |= {
            "name": block.name,
            "title": block.title,
            "uri": str(block.uri),
            "mime_type": block.mime_type,
            "size": block.size,
            "description": (block.description or "")[:500] or None,
        }
    elif kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        ref |= {
            "uri": str(resource.uri),
            "mime_type": resource.mime_type,
            "size": len(text.encode()) if text is not None else _b64_size(resource.blob),
            "encoding": "text" if text is not None else "binary",
        }
    return {key: value for key, value in ref.items() if value is not None}


def describe_block(block: Any, n: int) -> str:
    """A content block as text the model reads: text as it is; anything else as a described
    reference (what it is, its name, MIME type, URI and size), an embedded text resource
    with its text (bounded)."""
    kind = getattr(block, "type", "content")
    if kind == "text":
        return str(block.text)
    ref = content_ref(block)
    facts = [
        f"{key}: {json.dumps(ref[key], ensure_ascii=False)}"
        for key in ("name", "title", "uri", "mime_type", "size", "description")
        if key in ref
    ]
    label = {"resource_link": "resource link", "resource": "embedded resource"}.get(kind, kind)
    text = f"[{label} {n}" + (f" ({', '.join(facts)})" if facts else "") + "]"
    if kind == "resource":
        body = getattr(block.resource, "text", None)
        if body is not None:
            cut = len(body) - MAX_EMBEDDED_TEXT_CHARS
            text += "\n" + body[:MAX_EMBEDDED_TEXT_CHARS]
            if cut > 0:
                text += f"… [truncated {cut} chars]"
    return text


def content_text(blocks: list[Any]) -> str:
    return _clip("\n".join(describe_block(b, n) for n, b in enumerate(blocks, start=1)))


def content_media(blocks: list[Any]) -> list[MediaPart]:
    """The images of a result a model that takes images sees as images (bounded)."""
    media = []
    for block in blocks:
        if (
            getattr(block, "type", "") == "image"
            and block.mime_type in MODEL_IMAGE_TYPES
            and len(str(block.data)) <= MAX_MEDIA_BYTES
            and len(media) < MAX_MEDIA_PER_RESULT
        ):
            media.append(MediaPart(kind="image", mime_type=block.mime_type, data=str(block.data)))
    return media


def result_json(result: Any) -> Any:
    """A successful CallToolResult as the JSON the harness records and shows the model: the
    structured content when the server gives one, else a JSON text block parsed, else the text
    of its content blocks."""
    if result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        if len(text) <= MAX_RESULT_CHARS:
            return result.structured_content
        return {"text": _clip(text)}
    text = content_text(result.content)
    if len(result.content) == 1 and text[:1] in "{[":
        # Many servers return JSON as text; keep it as JSON for the ledger and the model.
        try:
            return json.loads(text)
        except ValueError:
            pass
    refs = [content_ref(b) for b in result.content if getattr(b, "type", "") != "text"]
    # Non-text blocks are described in the text and listed (with their URIs) for the record.
    return {"text": text, **({"content": refs[:MAX_REFS]} if refs else {})}


# --- a task's MCP tools -----------------------------------------------------------------------


def mcp_servers_named(names: Iterable[str]) -> list[str]:
    """The configured servers a spec's `tools` refer to, in first-mention order."""
    servers: list[str] = []
    for name in names:
        server = mcp_server_of(name)
        if server is not None and server not in servers:
            servers.append(server)
    return servers
