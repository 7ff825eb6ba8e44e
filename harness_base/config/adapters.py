"""Names and references of the agents other SDKs run: LangGraph graphs (with their options),
Pydantic AI and OpenAI Agents agents."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StringConstraints

from harness_base.config.fields import Strict
from harness_base.config.mcp import AgentMcpServer

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


class OpenAIAgentEntry(Strict):
    """A registered OpenAI Agents SDK agent with how its own MCP servers run, by the SDK's
    server name (docs/openai-agents.md)."""

    agent: GraphRef
    mcp_servers: dict[Annotated[str, StringConstraints(max_length=200)], AgentMcpServer] = {}


def openai_agent_entry(ref: str | OpenAIAgentEntry) -> OpenAIAgentEntry:
    """An `openai_agents` value as an entry (a bare reference grants its servers nothing)."""
    return ref if isinstance(ref, OpenAIAgentEntry) else OpenAIAgentEntry(agent=ref)
