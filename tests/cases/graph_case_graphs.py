"""A LangGraph graph for the graph case tests (tests/cases/test_graph_case_workers.py): LangChain
v1's agent on a scripted chat model (no network) that looks up a price (a read tool: a replay
runs it and checks its answer), notifies someone of it (a tool with no declared risk: a replay
answers it from the recording) and answers.

The user's message is JSON {"marker_dir"}: every model turn and tool run appends a line to
`<marker_dir>/runs`. The price is GRAPH_CASE_PRICE of the process running the tool (42 when
unset), so a test changes the tool's answer by restarting the worker with another."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, create_react_agent


def _marker_dir(messages: list) -> Path:
    return Path(
        json.loads(next(m for m in messages if isinstance(m, HumanMessage)).content)["marker_dir"]
    )


def _mark(marker_dir: Path, line: str) -> None:
    with open(marker_dir / "runs", "a") as out:
        out.write(line + "\n")


def runs(marker_dir: Path) -> list[str]:
    path = marker_dir / "runs"
    return path.read_text().split() if path.exists() else []


class PricingModel(FakeMessagesListChatModel):
    """Turn 0 looks the price up, turn 1 notifies (quoting the price it was told), turn 2
    answers with it."""

    responses: list = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> PricingModel:
        return self

    def _generate(self, messages: list, stop: Any = None, **kwargs: Any) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        _mark(_marker_dir(messages), f"model{turn}")
        answers = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
        if turn == 0:
            reply = AIMessage(
                content="", tool_calls=[{"name": "lookup", "args": {"item": "widget"}, "id": "c1"}]
            )
        elif turn == 1:
            reply = AIMessage(
                content="telling sales",
                tool_calls=[
                    {"name": "notify", "args": {"message": f"price {answers[0]}"}, "id": "c2"}
                ],
            )
        else:
            reply = AIMessage(content=f"the widget costs {answers[0]} ({answers[-1]})")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def lookup(item: str, state: Annotated[dict, InjectedState]) -> str:
    """Look up an item's price."""
    _mark(_marker_dir(state["messages"]), "lookup")
    return os.environ.get("GRAPH_CASE_PRICE", "42")


@tool
def notify(message: str, state: Annotated[dict, InjectedState]) -> str:
    """Tell the sales team (a side effect outside the workspace)."""
    _mark(_marker_dir(state["messages"]), "notify")
    return "sent"


lookup.metadata = {"risk": "read"}

pricing = create_agent(PricingModel(), tools=[lookup, notify])


# The same agent with its tools run by a node of its own instead of a ToolNode: a replay could
# not answer them without running them, so it stops before the graph starts.
def _model_node(state: MessagesState) -> dict:
    return {"messages": [PricingModel().invoke(state["messages"])]}


def _run_tools(state: MessagesState) -> dict:
    tools = {"lookup": lookup, "notify": notify}
    last = state["messages"][-1]
    return {
        "messages": [
            ToolMessage(
                content=tools[c["name"]].invoke({**c["args"], "state": state}),
                name=c["name"],
                tool_call_id=c["id"],
            )
            for c in last.tool_calls
        ]
    }


def _next(state: MessagesState) -> str:
    return "run_tools" if state["messages"][-1].tool_calls else END


_custom = StateGraph(MessagesState)
_custom.add_node("model", _model_node)
_custom.add_node("run_tools", _run_tools)
_custom.add_edge(START, "model")
_custom.add_conditional_edges("model", _next, ["run_tools", END])
_custom.add_edge("run_tools", "model")
pricing_own_tools = _custom.compile()


# The same agent, its notify call reviewed by a person first (LangChain's middleware).
pricing_reviewed = create_agent(
    PricingModel(),
    tools=[lookup, notify],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"notify": True})],
)


# LangGraph's prebuilt ReAct agent stopped by a static breakpoint before each of its tool steps.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1.x
    pricing_breakpoints = create_react_agent(
        PricingModel(), [lookup, notify], interrupt_before=["tools"]
    )
