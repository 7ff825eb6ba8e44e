"""The registered graph (graph_load) and its thread's config (graph_thread_config)."""

from __future__ import annotations

from typing import Any

from agent.refs import object_at
from harness_base.config import harness_config, langgraph_entry


class GraphNotRegistered(Exception):
    pass


def graph_load(name: str) -> Any:
    """The graph harness.yaml registers as `name`, compiled without a checkpointer of its own
    (the runner attaches the task's). Only operators name code to import."""
    registered = harness_config().langgraph_graphs.get(name)
    if registered is None:
        raise GraphNotRegistered(f"graph {name!r} is not registered in harness.yaml")
    ref = langgraph_entry(registered).graph
    target = object_at(ref)
    if hasattr(target, "compile") and not hasattr(target, "stream"):
        target = target.compile()  # a StateGraph builder
    if not hasattr(target, "stream") or not hasattr(target, "copy"):
        raise GraphNotRegistered(f"{ref} is not a LangGraph graph (compiled or StateGraph)")
    return target


def graph_thread_config(*, task_id: Any, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": str(task_id), "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}
