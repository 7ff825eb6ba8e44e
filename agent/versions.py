"""The code a run works with, as every checkpoint and review records it (`versions`, issue
#43): the harness's version, and the sha256 of the canonical JSON of the task spec, of each
tool's argument schema, of each MCP server's tool list, of a LangGraph graph's structure, of
an SDK agent's definition and of the review policy. Each hashed body is stored once
(checkpoints.VersionBody), so a drift review can show what a hash stood for.

Computed once per run (`versions_current`, cached on the run): a checkpoint is written at
every transition, the code under a run does not change while it runs."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from checkpoints.models import VersionBody
from checkpoints.versions import version_bodies_store, version_body
from checkpoints.versions_ref import StoredVersions
from harness_base.versions import harness_version
from review.policy_rules import policy_rules
from tasks.agent_state import McpTool
from tasks.canonical import canonical_hash
from tasks.tools.registry import ToolSpec, UnknownTool, registry

# The keys of a `versions` dict that name hashes of one body each (tools and mcp: of many).
SINGLE_KEYS = ("spec", "graph", "agent", "policy")


def policy_body() -> list[dict[str, Any]]:
    """The review policy as configured: the enabled admin rules, then harness.yaml's."""
    return [{"source": source, **rule.model_dump(mode="json")} for source, rule in policy_rules()]


def mcp_bodies(tools: list[McpTool]) -> dict[str, list[dict[str, Any]]]:
    """Each MCP server's tool list (name, inputSchema, annotations), sorted by name."""
    servers: dict[str, list[dict[str, Any]]] = {}
    for tool in tools:
        servers.setdefault(tool.server, []).append(
            {"name": tool.tool, "inputSchema": tool.input_schema, "annotations": tool.annotations}
        )
    return {server: sorted(listed, key=lambda t: t["name"]) for server, listed in servers.items()}


def versions_build(
    *,
    spec: dict[str, Any],
    tools: dict[str, Any],
    mcp: dict[str, Any] | None = None,
    graph: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    policy: list[dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """-> (versions, {sha256: body} of every hashed body but the spec's). `tools`: name ->
    argument schema; `mcp`: server -> tool list; `graph` and `agent` only for the tasks that
    have one."""
    bodies: dict[str, Any] = {}

    def hashed(body: Any) -> str:
        key = canonical_hash(body)
        bodies[key] = body
        return key

    versions: dict[str, Any] = {
        "harness": harness_version(),
        # Hashed, not stored: the spec is the task's own (Task.spec) and may hold its files and
        # secrets, which must go when the task is deleted; VersionBody rows are shared, kept.
        "spec": canonical_hash(spec),
        "tools": {name: hashed(schema) for name, schema in sorted(tools.items())},
        "mcp": {server: hashed(listed) for server, listed in sorted((mcp or {}).items())},
        "policy": hashed(policy_body() if policy is None else policy),
    }
    if graph is not None:
        versions["graph"] = hashed(graph)
    if agent is not None:
        versions["agent"] = hashed(agent)
    return versions, bodies


# A registered tool's argument schema by its pydantic model: pydantic builds a schema in
# milliseconds, every pick-up would pay it for every tool. Filled in the worker before it forks
# (versions_warm_up), so every work horse starts with it.
_schemas: dict[Any, dict[str, Any]] = {}


def tool_schema(tool: ToolSpec) -> dict[str, Any]:
    if tool.input_schema is not None:
        return tool.input_schema
    schema = _schemas.get(tool.args_model)
    if schema is None:
        schema = _schemas[tool.args_model] = tool.json_schema()
    return schema


def versions_warm_up() -> None:
    """The argument schemas of every registered tool, built once before the worker forks."""
    for name in registry.names():
        tool_schema(registry.get(name))


def _native_tools(run: Any) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for name in run.tool_names():
        try:
            schemas[name] = tool_schema(run.tool(name))
        except UnknownTool:
            continue  # gone from this worker's code: its absence is the record
    return schemas


def versions_current(run: Any) -> dict[str, Any]:
    """The versions of the code `run` works with: computed on first use, then the same dict
    for the rest of the run. `run` is the harness's own loop (agent.runtime.run.Run: its tools
    and the MCP tools in its state), or a runner that set `run.version_parts` (a dict of
    versions_build's keyword arguments) before its first write. Returns {} for a run that has
    neither (a runner that does not record versions)."""
    cached = getattr(run, "_versions", None)
    if cached is not None:
        return cached
    parts = getattr(run, "version_parts", None)
    if parts is None and callable(getattr(run, "tool_names", None)):
        parts = {
            "spec": run.task.spec,
            "tools": _native_tools(run),
            "mcp": mcp_bodies(run.state.mcp_tools or []),
        }
    if parts is None:
        return {}
    built, bodies = versions_build(**parts)
    # The whole dict is a body too: the run's checkpoints name it (checkpoints.versions_ref),
    # written with the other bodies by the run's first durable write.
    versions = StoredVersions(built)
    bodies[versions.ref] = built
    run._versions = versions
    run._version_bodies = bodies
    return versions


def version_lookup(run: Any) -> Any:
    """sha256 -> body for a drift comparison (tasks.drift's `bodies`): the run's own bodies
    (not written yet, maybe) first, then the stored ones."""
    own = getattr(run, "_version_bodies", None) or {}
    return lambda sha: own[sha] if sha in own else version_body(sha)


def version_bodies_unwritten(run: Any) -> list[VersionBody]:
    """The rows of the bodies behind `versions_current(run)` this run has not written yet,
    for its next durable write (`version_bodies_written` once it committed)."""
    bodies = getattr(run, "_version_bodies", None)
    return [VersionBody(sha256=key, body=body) for key, body in (bodies or {}).items()]


def version_bodies_written(run: Any) -> None:
    run._version_bodies = None


def version_bodies_flush(run: Any) -> None:
    """Store the bodies now (runners whose checkpoints are not written by a fenced write)."""
    bodies = getattr(run, "_version_bodies", None)
    if bodies:
        version_bodies_store(bodies=bodies)
        version_bodies_written(run)


def described(value: Any) -> Any:
    """A stable stand-in for part of an agent's definition: text as it is, a function or a
    class by its dotted name (never a repr, which names a memory address)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [described(v) for v in value]
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if name is not None:
        return f"{getattr(value, '__module__', '')}.{name}"
    return f"{type(value).__module__}.{type(value).__qualname__}"


def type_schema(output_type: Any) -> Any:
    """The JSON schema of an agent's output type, else its name."""
    if output_type is None or output_type is str:
        return None
    try:
        return TypeAdapter(output_type).json_schema()
    except Exception:  # not a type pydantic describes (a list of outputs, a marker object)
        return described(output_type)
