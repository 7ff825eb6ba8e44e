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

This package describes tools and is cheap to import (web requests use it for review pages);
talking to servers is agent/tools/mcp_client/, which loads the MCP SDK. Its modules, none
importing another:

    names     tool names (`<server>__<tool>`), patterns, the servers a spec's tools name
    specs     a tool's registry entry (mcp_tool_spec): policy from annotations, arguments
              checked against its inputSchema
    results   a call's result as recorded (result_json) and as the model reads it
"""

from __future__ import annotations

from tasks.tools.mcp.names import (
    SEPARATOR,
    TOOL_NAME,
    mcp_name,
    mcp_server_of,
    mcp_servers_named,
    tool_pattern_matches,
)
from tasks.tools.mcp.results import (
    MAX_EMBEDDED_TEXT_CHARS,
    MAX_MEDIA_BYTES,
    MAX_MEDIA_PER_RESULT,
    MAX_REFS,
    MAX_RESULT_CHARS,
    MODEL_IMAGE_TYPES,
    content_media,
    content_ref,
    content_text,
    describe_block,
    result_json,
)
from tasks.tools.mcp.specs import (
    MAX_DESCRIPTION_CHARS,
    MAX_SCHEMA_CHARS,
    MCP_DEFAULT_HINTS,
    JsonSchemaArgs,
    args_model_for,
    check_tool_schema,
    mcp_tool_spec,
    recorded_tool,
    tool_policy,
)

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_EMBEDDED_TEXT_CHARS",
    "MAX_MEDIA_BYTES",
    "MAX_MEDIA_PER_RESULT",
    "MAX_REFS",
    "MAX_RESULT_CHARS",
    "MAX_SCHEMA_CHARS",
    "MCP_DEFAULT_HINTS",
    "MODEL_IMAGE_TYPES",
    "SEPARATOR",
    "TOOL_NAME",
    "JsonSchemaArgs",
    "args_model_for",
    "check_tool_schema",
    "content_media",
    "content_ref",
    "content_text",
    "describe_block",
    "mcp_name",
    "mcp_server_of",
    "mcp_servers_named",
    "mcp_tool_spec",
    "recorded_tool",
    "result_json",
    "tool_pattern_matches",
    "tool_policy",
]
