"""A LangGraph graph for the durable-execution tests: three nodes, the middle one slow, each
appending a line to `<marker_dir>/runs` when it starts and finishes, so a test can see which
nodes ran how often across crashes, cancels and resumes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


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


def chain(state: type, *nodes: tuple[str, Any]):
    """The compiled graph running `nodes` (name, function) one after the other."""
    builder = StateGraph(state)
    builder.add_sequence(list(nodes))
    builder.add_edge(START, nodes[0][0])
    builder.add_edge(nodes[-1][0], END)
    return builder.compile()


graph = chain(State, ("first", first), ("slow", slow), ("last", last))


def runs(marker_dir: Path) -> list[str]:
    path = marker_dir / "runs"
    return path.read_text().split() if path.exists() else []


# --- a graph whose tool writes files in the task's workspace, one super-step after another ---


class FilesState(TypedDict, total=False):
    marker_dir: str
    done: list[str]


def write_files(config: dict, files: dict[str, str | None]) -> None:
    """The graph's file tool: write (or, for None, delete) files in the task's workspace,
    which the harness passes as configurable `harness_workspace`."""
    root = Path(config["configurable"]["harness_workspace"])
    for rel, content in files.items():
        path = root / rel
        if content is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)


def files_node(name: str, files: dict[str, str | None]):
    def node(state: FilesState, config) -> dict:
        mark(state, name)
        write_files(config, files)
        return {"done": [*state.get("done", []), name]}

    return node


FILES_STEPS = {
    "draft": {"notes/a.txt": "draft\n", "b.txt": "b1\n"},
    "revise": {"notes/a.txt": "revised\n", "c.txt": "c1\n"},
    "finish": {"b.txt": None, "out/d.txt": "d1\n"},
}
files_graph = chain(FilesState, *((name, files_node(name, f)) for name, f in FILES_STEPS.items()))


def workspace_files(root: Path) -> dict[str, str]:
    """Every file under root (relative path -> text)."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


# --- a graph whose approved action fails in the super-step that consumes the decision ------


class AskState(TypedDict, total=False):
    asked: bool


def ask_then_fail(state: AskState) -> dict:
    answer = interrupt({"question": "go ahead?"})
    if answer.get("type") == "approve":
        raise RuntimeError("the approved action broke")
    return {"asked": True}


asks_then_fails = chain(AskState, ("ask", ask_then_fail))


# --- a graph whose decided interrupt is consumed by a slow super-step ------------------------


class AskSlowState(TypedDict, total=False):
    marker_dir: str
    sleep_s: float
    answer: str


def ask_then_slow(state: AskSlowState) -> dict:
    answer = interrupt({"question": "ship it?"})
    mark(state, "resumed:start")
    time.sleep(state.get("sleep_s", 0))
    mark(state, "resumed:end")
    return {"answer": answer.get("type", "")}


asks_then_sleeps = chain(AskSlowState, ("ask", ask_then_slow))


# --- a graph whose first act is a write into the task's workspace ---------------------------


class NoteState(TypedDict, total=False):
    note: str


def write_note(state: NoteState, config) -> dict:
    # No mkdir: the harness creates the workspace before the first node runs.
    with open(Path(config["configurable"]["harness_workspace"]) / "note.txt", "w") as out:
        out.write(state["note"])
    return {"note": state["note"]}


writes_first = chain(NoteState, ("write", write_note))
