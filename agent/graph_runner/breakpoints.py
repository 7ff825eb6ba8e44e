"""Static breakpoints are reviews too (GraphRunBreakpoints, part of GraphRun): whether
LangGraph stopped the run at one (interrupt_before / interrupt_after), the tool calls the tools
node after it would run, and the reviews asked there."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt import ToolNode

from agent.graph_runner.asking import GraphRunAsking
from agent.graph_runner.values import jsonable
from tasks.events import EventType

# A static breakpoint (interrupt_before / interrupt_after): before a tools node, one review per
# pending tool call; anywhere else, one review of going on past it.
# respond answers a tool call on the tool's behalf: the tool never runs, the graph gets the
# response as its ToolMessage (agent.graph_runner.past_breakpoints).
BREAKPOINT_TOOL_DECISIONS = ["approve", "edit", "reject", "respond"]
BREAKPOINT_DECISIONS = ["approve", "reject"]
# The channel key under which a checkpoint's versions_seen records the versions a breakpoint
# stop saw (langgraph.constants.INTERRUPT, no longer public).
INTERRUPT = "__interrupt__"


class GraphRunBreakpoints(GraphRunAsking):
    """GraphRun's breakpoints: breakpoint_at, pending_tool_calls, pause_for_breakpoint."""

    def breakpoint_at(self, graph: Any, state: Any) -> str:
        """ "before" / "after" when LangGraph stopped the run at this checkpoint for one of the
        graph's static breakpoints (interrupt_before / interrupt_after), as its loop decides
        it: a breakpoint node is due and a channel changed since the last stop. "" if not."""
        if state.interrupts or not state.next or (state.metadata or {}).get("source") == "update":
            return ""
        before = getattr(graph, "interrupt_before_nodes", None) or ()
        after = getattr(graph, "interrupt_after_nodes", None) or ()
        if not before and not after:
            return ""
        saved = self.saver.get_tuple(state.config)
        if saved is None:
            return ""
        checkpoint = saved.checkpoint
        seen = checkpoint["versions_seen"].get(INTERRUPT, {})
        if not any(
            _newer(version, seen.get(channel))
            for channel, version in checkpoint["channel_versions"].items()
        ):
            return ""
        if _any_named(before, state.next):
            return "before"
        if after and saved.parent_config is not None:
            ran = graph.get_state(saved.parent_config).next
            if _any_named(after, ran):
                return "after"
        return ""

    def pending_tool_calls(self, graph: Any, state: Any) -> tuple[str, list[dict[str, Any]]]:
        """(the tools node, the tool calls of the last AIMessage it has not answered yet) when
        a node the graph goes on to is a ToolNode; else ("", [])."""
        tools = next(
            (
                name
                for name in state.next
                if isinstance(getattr(graph.nodes.get(name), "bound", None), ToolNode)
            ),
            "",
        )
        values = state.values if isinstance(state.values, dict) else {}
        messages = values.get("messages") or []
        last_ai = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=None)
        if not tools or last_ai is None:
            return "", []
        answered = {m.tool_call_id for m in messages[last_ai + 1 :] if isinstance(m, ToolMessage)}
        calls = [c for c in messages[last_ai].tool_calls if c.get("id") not in answered]
        return (tools, calls) if calls else ("", [])

    def pause_for_breakpoint(self, graph: Any, state: Any, *, where: str) -> NoReturn:
        checkpoint_id = state.config["configurable"]["checkpoint_id"]
        nodes = list(dict.fromkeys(state.next))
        tools, calls = self.pending_tool_calls(graph, state)
        where = where or "before"
        if calls:
            actions = [
                (
                    "breakpoint",
                    tools,
                    (
                        str(call["name"]),
                        jsonable(call.get("args") or {}),
                        {
                            "mode": "breakpoint_tool",
                            "allowed": BREAKPOINT_TOOL_DECISIONS,
                            "tool_call_id": call.get("id"),
                            "breakpoint": where,
                        },
                        f"The graph stopped at its breakpoint before the `{tools}` node, "
                        f"which runs this call:\n\n"
                        + json.dumps(
                            {"tool": call["name"], "args": call.get("args")},
                            indent=2,
                            ensure_ascii=False,
                            default=str,
                        ),
                    ),
                )
                for call in calls
            ]
        else:
            arguments = {"breakpoint": where, "next": nodes}
            actions = [
                (
                    "breakpoint",
                    ", ".join(nodes),
                    (
                        ", ".join(nodes),
                        arguments,
                        {
                            "mode": "breakpoint",
                            "allowed": BREAKPOINT_DECISIONS,
                            "breakpoint": where,
                        },
                        f"The graph stopped at a breakpoint ({where}); next: "
                        f"{', '.join(nodes)}. Approve to go on, reject to stop the task.",
                    ),
                )
            ]
        self.event(
            EventType.GRAPH_BREAKPOINT,
            {"checkpoint_id": checkpoint_id, "breakpoint": where, "next": nodes},
        )
        self.open_reviews(checkpoint_id, actions)


def _any_named(nodes: Any, names: Any) -> bool:
    """Whether a breakpoint list ("*" or node names) names any of `names`."""
    return bool(names) and (nodes == "*" or any(name in nodes for name in names))


def _newer(version: str | int | float, seen: str | int | float | None) -> bool:
    """Whether a channel's version is past the one the last breakpoint stop saw (none seen:
    its type's zero, as LangGraph's loop compares them). A checkpointer's versions are all of
    one type (this saver's are strings)."""
    if isinstance(version, str):
        return version > (seen if isinstance(seen, str) else "")
    return version > (seen if seen is not None and not isinstance(seen, str) else 0)
