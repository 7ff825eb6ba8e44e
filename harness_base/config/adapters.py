"""Names and references of the agents other SDKs run: LangGraph graphs (with their options),
Pydantic AI and OpenAI Agents agents."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StringConstraints

from harness_base.config.fields import Strict

GraphName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
GraphRef = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
    ),
]


class LangGraphEntry(Strict):
    """A registered LangGraph graph with its options (docs/langgraph.md)."""

    graph: GraphRef
    # What a plain `interrupt(...)` of this graph returns once reviewed: "envelope" (the
    # default) the harness's {"type": "approve" | "reject" | "respond", ...}; "value" the
    # reviewer's response itself, as `Command(resume=value)` would give it (such a review
    # offers respond and reject; a rejection stops the task instead of resuming the graph).
    interrupt_resume: Literal["envelope", "value"] = "envelope"


def langgraph_entry(ref: str | LangGraphEntry) -> LangGraphEntry:
    """A `langgraph_graphs` value as an entry (a bare reference has the default options)."""
    return ref if isinstance(ref, LangGraphEntry) else LangGraphEntry(graph=ref)
