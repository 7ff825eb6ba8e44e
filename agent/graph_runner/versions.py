"""What a graph task's `versions` hash (agent.versions): the graph's structure (nodes, edges,
interrupt points) and the argument schema of each tool its ToolNodes hold."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode

log = logging.getLogger(__name__)


def _points(value: Any) -> list[str]:
    if value in (None, ()):
        return []
    return ["*"] if value == "*" else sorted(str(v) for v in value)


def graph_structure(graph: Any) -> dict[str, Any]:
    """{"nodes", "edges": [[source, target], ...], "interrupt_before", "interrupt_after"} of
    a compiled graph, each sorted: the same graph hashes the same on every worker."""
    try:
        drawn = graph.get_graph()
        nodes = sorted(str(node) for node in drawn.nodes)
        edges = sorted([str(edge.source), str(edge.target)] for edge in drawn.edges)
    except Exception:  # a graph LangGraph cannot draw still runs: its nodes, without edges
        log.warning("graph: structure not drawn; recording its nodes only", exc_info=True)
        nodes, edges = sorted(str(node) for node in graph.nodes), []
    return {
        "nodes": nodes,
        "edges": edges,
        "interrupt_before": _points(getattr(graph, "interrupt_before_nodes", None)),
        "interrupt_after": _points(getattr(graph, "interrupt_after_nodes", None)),
    }


def graph_tool_schemas(graph: Any) -> dict[str, Any]:
    """name -> argument JSON schema of every tool the graph's ToolNodes hold."""
    schemas: dict[str, Any] = {}
    for node in graph.nodes.values():
        bound = getattr(node, "bound", None)
        if not isinstance(bound, ToolNode):
            continue
        for name, tool in bound.tools_by_name.items():
            try:
                schemas[name] = convert_to_openai_tool(tool)["function"].get("parameters", {})
            except Exception:  # a tool langchain cannot describe: recorded without a schema
                log.warning("tool %s: no argument schema", name, exc_info=True)
                schemas[name] = {}
    return schemas


def graph_version_parts(*, spec: dict[str, Any], graph: Any) -> dict[str, Any]:
    """The keyword arguments of agent.versions.versions_build for a graph task."""
    return {"spec": spec, "tools": graph_tool_schemas(graph), "graph": graph_structure(graph)}
