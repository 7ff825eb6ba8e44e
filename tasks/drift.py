"""What changed between the code a checkpoint was made with and the code a worker runs
(issue #43): `drift(old_versions, new_versions, pending)` compares two `versions` records
(the head checkpoint's and the running code's), per tool, MCP server, graph, agent and policy,
and says whether a change touches what happens next.

`pending` says what the task does next: `{"tool": name, "arguments": {...}}` (a call about to
run), `{"node": name}` (a graph about to run a node), `{"agent": True}` (an SDK agent about to
take a turn), or None. A change touches it when the pending call's tool is gone or its
argument schema changed (directly, or as an entry of its MCP server's tool list), the graph's
next node is gone or its edges or interrupt points changed, or the SDK agent's definition
changed. Anything else (another tool, the policy, which every approval is re-checked against
anyway, the harness version) is harmless and only recorded.

Pure: the hashed bodies are read through `bodies` (a sha256 -> body lookup, the checkpoints
app's version store), and the pending arguments are validated against the new schema with
JSON Schema, so the answer is the same in a worker and on a page."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tasks.drift_schema import arguments_check, mcp_tool_schema, parts_changed, schema_fields

Bodies = Callable[[str], Any]
MCP_SEPARATOR = "__"


@dataclass(frozen=True)
class Change:
    """One thing that changed: `kind` tool | mcp | graph | agent | policy | spec | harness,
    `name` (the tool or server; empty for the one graph, agent, policy), `change` changed |
    added | removed, the two hashes and, where the store has them, the two bodies."""

    kind: str
    name: str
    change: str
    old: Any = None
    new: Any = None
    old_body: Any = None
    new_body: Any = None
    # A tool's schema: fields added, removed, newly required. A graph: nodes added, removed.
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    # An SDK agent's definition: the parts that changed ("instructions", "tools.<name>").
    parts: list[str] = field(default_factory=list)

    def label(self) -> str:
        what = f"{self.kind} {self.name}".strip()
        detail = []
        if self.required:
            detail.append("now requires " + ", ".join(self.required))
        if self.added:
            detail.append("added " + ", ".join(self.added))
        if self.removed:
            detail.append("removed " + ", ".join(self.removed))
        if self.parts:
            detail.append(", ".join(self.parts))
        return f"{what} {self.change}" + (f" ({'; '.join(detail)})" if detail else "")


@dataclass(frozen=True)
class Drift:
    changes: list[Change]
    # Why the drift touches what happens next (empty: it does not).
    touches: list[str] = field(default_factory=list)
    # The pending call's arguments against its tool's new schema: None when there is no
    # pending call or no schema to check them against.
    arguments_valid: bool | None = None
    argument_errors: list[dict[str, str]] = field(default_factory=list)
    # The pending call's tool under the new code: its argument schema (None: unknown), and
    # whether it is gone.
    schema: Any = None
    tool_gone: bool = False

    @property
    def any(self) -> bool:
        return bool(self.changes)

    @property
    def touches_next(self) -> bool:
        return bool(self.touches)

    def summary(self) -> list[str]:
        return [change.label() for change in self.changes]

    def as_json(self) -> dict[str, Any]:
        return {
            "changes": [asdict(change) for change in self.changes],
            "summary": self.summary(),
            "touches_next": self.touches_next,
            "touches": self.touches,
            "arguments_valid": self.arguments_valid,
            "argument_errors": self.argument_errors,
            "schema": self.schema,
            "tool_gone": self.tool_gone,
        }


def _no_bodies(_sha: str) -> Any:
    return None


def _schema_change(kind: str, name: str, old: Any, new: Any, bodies: Bodies) -> Change:
    old_body, new_body = (bodies(old) if old else None), (bodies(new) if new else None)
    old_fields, old_required = schema_fields(old_body)
    new_fields, new_required = schema_fields(new_body)
    return Change(
        kind=kind,
        name=name,
        change="added" if old is None else "removed" if new is None else "changed",
        old=old,
        new=new,
        old_body=old_body,
        new_body=new_body,
        added=sorted(new_fields - old_fields),
        removed=sorted(old_fields - new_fields),
        required=sorted(new_required - old_required),
    )


def _mapping_changes(kind: str, old: Any, new: Any, bodies: Bodies) -> list[Change]:
    old, new = dict(old or {}), dict(new or {})
    return [
        _schema_change(kind, name, old.get(name), new.get(name), bodies)
        for name in sorted(set(old) | set(new))
        if old.get(name) != new.get(name)
    ]


def _graph_nodes(body: Any) -> set[str]:
    nodes = (body or {}).get("nodes") if isinstance(body, Mapping) else None
    if isinstance(nodes, Mapping):
        return set(nodes)
    return {str(n.get("id", n.get("name")) if isinstance(n, Mapping) else n) for n in nodes or []}


def _single_change(kind: str, old: Any, new: Any, bodies: Bodies) -> Change | None:
    if old == new:
        return None
    # "harness" is no hash but {"version", "commit"}: no body to look up.
    old_body = bodies(old) if old and isinstance(old, str) else None
    new_body = bodies(new) if new and isinstance(new, str) else None
    added = removed = []
    if kind == "graph":
        added = sorted(_graph_nodes(new_body) - _graph_nodes(old_body))
        removed = sorted(_graph_nodes(old_body) - _graph_nodes(new_body))
    return Change(
        kind=kind,
        name="",
        change="added" if old is None else "removed" if new is None else "changed",
        old=old,
        new=new,
        old_body=old_body,
        new_body=new_body,
        added=added,
        removed=removed,
        parts=parts_changed(old_body, new_body)
        if kind == "agent" and old_body and new_body
        else [],
    )


def _node_edges(body: Any, node: str) -> list[Any]:
    edges = (body or {}).get("edges") if isinstance(body, Mapping) else None
    return sorted(
        (repr(edge) for edge in edges or [] if node in (edge if isinstance(edge, list) else [])),
    )


def _node_points(body: Any, node: str) -> tuple[bool, bool]:
    body = body if isinstance(body, Mapping) else {}
    return (
        node in (body.get("interrupt_before") or []),
        node in (body.get("interrupt_after") or []),
    )


def _touches_call(tool: str, changes: list[Change]) -> tuple[list[str], Any]:
    """Why a change touches the pending call of `tool`, and its new schema (None: unknown)."""
    why: list[str] = []
    schema: Any = None
    for change in changes:
        if change.kind == "tool" and change.name == tool:
            schema = change.new_body
            if change.change == "removed":
                why.append(f"the pending call's tool {tool} is gone")
            else:
                why.append(f"the pending call's tool {tool} changed its argument schema")
        elif change.kind == "mcp" and tool.startswith(change.name + MCP_SEPARATOR):
            short = tool[len(change.name) + len(MCP_SEPARATOR) :]
            if change.change == "removed":
                why.append(f"the pending call's MCP server {change.name} is gone")
                continue
            old_schema = mcp_tool_schema(change.old_body, short)
            new_schema = mcp_tool_schema(change.new_body, short)
            if (
                change.old_body is not None
                and change.new_body is not None
                and (old_schema == new_schema)
            ):
                continue  # another of the server's tools changed
            schema = new_schema if schema is None else schema
            if change.new_body is not None and new_schema is None:
                why.append(f"the pending call's tool {tool} is gone from MCP server {change.name}")
            else:
                why.append(
                    f"the pending call's tool {tool} changed its argument schema "
                    f"(MCP server {change.name})"
                )
    return why, schema


def _touches_node(node: str, change: Change) -> list[str]:
    if node in change.removed or (
        change.new_body is not None and node not in _graph_nodes(change.new_body)
    ):
        return [f"the graph's next node {node} is gone"]
    if change.old_body is None or change.new_body is None:
        return [f"the graph changed and its next node {node} cannot be compared"]
    if _node_edges(change.old_body, node) != _node_edges(change.new_body, node) or (
        _node_points(change.old_body, node) != _node_points(change.new_body, node)
    ):
        return [f"the graph's next node {node} changed (its edges or interrupt points)"]
    return []


def drift(
    old_versions: Mapping[str, Any] | None,
    new_versions: Mapping[str, Any] | None,
    pending: Mapping[str, Any] | None,
    *,
    bodies: Bodies = _no_bodies,
) -> Drift:
    """Compare two `versions` records. An empty old record (a checkpoint written before
    versions were recorded) is no drift: there is nothing to compare against."""
    old, new = dict(old_versions or {}), dict(new_versions or {})
    if not old or not new:
        return Drift(changes=[])
    changes = _mapping_changes("tool", old.get("tools"), new.get("tools"), bodies)
    changes += _mapping_changes("mcp", old.get("mcp"), new.get("mcp"), bodies)
    for kind in ("graph", "agent", "policy", "spec", "harness"):
        one = _single_change(kind, old.get(kind), new.get(kind), bodies)
        if one is not None:
            changes.append(one)
    touches: list[str] = []
    valid: bool | None = None
    errors: list[dict[str, str]] = []
    schema, gone = None, False
    pending = pending or {}
    if pending.get("tool"):
        why, schema = _touches_call(str(pending["tool"]), changes)
        touches += why
        gone = any(" is gone" in line for line in why)
        if why and schema is not None:
            valid, errors = arguments_check(schema, pending.get("arguments") or {})
    if pending.get("node"):
        for change in changes:
            if change.kind == "graph":
                touches += _touches_node(str(pending["node"]), change)
    if pending.get("agent"):
        touches += [
            "the agent's definition changed" for change in changes if change.kind == "agent"
        ]
    return Drift(
        changes=changes,
        touches=touches,
        arguments_valid=valid,
        argument_errors=errors,
        schema=schema if touches else None,
        tool_gone=gone,
    )
