"""A LangGraph graph for the durable-execution tests: three nodes, the middle one slow, each
appending a line to `<marker_dir>/runs` when it starts and finishes, so a test can see which
nodes ran how often across crashes, cancels and resumes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    marker_dir: str
    sleep_s: float
    trail: str


def mark(state: State, line: str) -> None:
    with open(Path(state["marker_dir"]) / "runs", "a") as out:
        out.write(line + "\n")


def first(state: State) -> dict:
    mark(state, "first")
    return {"trail": "first"}


def slow(state: State) -> dict:
    mark(state, "slow:start")
    time.sleep(state.get("sleep_s", 0))
    mark(state, "slow:end")
    return {"trail": state["trail"] + ",slow"}


def last(state: State) -> dict:
    mark(state, "last")
    return {"trail": state["trail"] + ",last"}


builder = StateGraph(State)
builder.add_node("first", first)
builder.add_node("slow", slow)
builder.add_node("last", last)
builder.add_edge(START, "first")
builder.add_edge("first", "slow")
builder.add_edge("slow", "last")
builder.add_edge("last", END)
graph = builder.compile()


def runs(marker_dir: Path) -> list[str]:
    path = marker_dir / "runs"
    return path.read_text().split() if path.exists() else []
