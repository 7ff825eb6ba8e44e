"""A worked LangGraph example for docs/langgraph.md: a release bot with a tool and a human
approval step. Registered in harness.yaml as `release_bot`:

    langgraph_graphs:
      release_bot: "examples.langgraph_release:graph"

plan    reads the changes from the input and picks the next version (a plain function);
notes   calls the `render_notes` tool (a LangChain tool) to draft the release notes;
approve asks a human: `interrupt({...})` - in the harness this is a review in the inbox;
publish records the release, with the version a reviewer may have changed.

The graph is compiled without a checkpointer: the harness runs it with its own
(checkpoints.langgraph.DjangoCheckpointSaver), one thread per task.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class ReleaseState(TypedDict, total=False):
    changes: list[str]
    current: str
    version: str
    notes: str
    decision: dict[str, Any]
    published: str
    log: Annotated[list[str], operator.add]


@tool
def render_notes(version: str, changes: list[str]) -> str:
    """Render release notes for a version from a list of changes."""
    lines = [f"Release {version}", ""] + [f"- {change}" for change in changes]
    return "\n".join(lines)


def plan(state: ReleaseState) -> dict[str, Any]:
    major, minor, _patch = (int(p) for p in state.get("current", "1.0.0").split("."))
    breaking = any(c.lower().startswith("breaking") for c in state.get("changes", []))
    version = f"{major + 1}.0.0" if breaking else f"{major}.{minor + 1}.0"
    return {"version": version, "log": [f"plan: {version}"]}


def notes(state: ReleaseState) -> dict[str, Any]:
    text = render_notes.invoke({"version": state["version"], "changes": state.get("changes", [])})
    return {"notes": text, "log": ["notes: drafted"]}


def approve(state: ReleaseState) -> dict[str, Any]:
    # The harness answers {"type": "approve"}, {"type": "reject", "message": ...} or
    # {"type": "respond", "value": <JSON>}; respond may set another version.
    decision = interrupt(
        {"action": "publish_release", "version": state["version"], "notes": state["notes"]}
    )
    update: dict[str, Any] = {"decision": decision, "log": [f"approve: {decision['type']}"]}
    if decision["type"] == "respond" and isinstance(decision.get("value"), dict):
        update["version"] = decision["value"].get("version", state["version"])
    return update


def publish(state: ReleaseState) -> dict[str, Any]:
    if state["decision"]["type"] == "reject":
        reason = state["decision"].get("message") or "no reason"
        return {"published": "", "log": [f"publish: skipped ({reason})"]}
    return {"published": state["version"], "log": [f"publish: {state['version']}"]}


builder = StateGraph(ReleaseState)
builder.add_node("plan", plan)
builder.add_node("notes", notes)
builder.add_node("approve", approve)
builder.add_node("publish", publish)
builder.add_edge(START, "plan")
builder.add_edge("plan", "notes")
builder.add_edge("notes", "approve")
builder.add_edge("approve", "publish")
builder.add_edge("publish", END)
graph = builder.compile()
