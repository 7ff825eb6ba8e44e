"""A LangGraph graph for the durable-execution tests: three nodes, the middle one slow, each
appending a line to `<marker_dir>/runs` when it starts and finishes, so a test can see which
nodes ran how often across crashes, cancels and resumes."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import create_react_agent
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


# --- a graph written elsewhere: its interrupt() expects the human's answer itself ----------


class VersionState(TypedDict, total=False):
    published: str


def ask_version(state: VersionState) -> dict:
    version = interrupt({"question": "which version?"})
    return {"published": f"published {version}"}


asks_plain = chain(VersionState, ("ask", ask_version))


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


# --- LangChain agents on langchain_core's fake chat model ------------------------------------


class ToolCallingFake(FakeMessagesListChatModel):
    """langchain_core's fake chat model with tools bound (it ignores them) and its answer read
    from the conversation, so a resume in another worker process gets the same turn: the
    user's message is JSON {"tool": name, "calls": [args, ...]}; the first turn asks for one
    call per entry, and once tools answered it finishes quoting every answer."""

    responses: list = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        return self

    def _generate(self, messages: list, stop: Any = None, **kwargs: Any) -> ChatResult:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        if answers:
            reply = AIMessage(content="results: " + " | ".join(str(m.content) for m in answers))
        else:
            asked = json.loads(next(m for m in messages if isinstance(m, HumanMessage)).content)
            reply = AIMessage(
                content="",
                tool_calls=[
                    {"name": asked.get("tool", "add"), "args": args, "id": f"call-{i}"}
                    for i, args in enumerate(asked["calls"])
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"{a}+{b}={a + b}"


@tool
def send_announcement(channel: str, text: str) -> str:
    """Post an announcement to a channel."""
    return f"posted to {channel}: {text}"


@tool
def charge_card(amount: int, config: RunnableConfig) -> str:
    """Charge the customer's card (its side effect: a line in the workspace's charges.txt)."""
    with open(Path(config["configurable"]["harness_workspace"]) / "charges.txt", "a") as out:
        out.write(f"{amount}\n")
    return f"charged {amount}"


def agent_input(*calls: dict, tool: str = "add") -> dict:
    return {
        "messages": [{"role": "user", "content": json.dumps({"tool": tool, "calls": list(calls)})}]
    }


react_input = agent_input

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1.x
    # LangGraph's prebuilt ReAct agent stopped by static breakpoints.
    react_before_tools = create_react_agent(ToolCallingFake(), [add], interrupt_before=["tools"])
    react_after_agent = create_react_agent(ToolCallingFake(), [add], interrupt_after=["agent"])
    react_charge = create_react_agent(ToolCallingFake(), [charge_card], interrupt_before=["tools"])

# LangChain v1's agent whose announcements wait for a human (one batched review per turn).
announcer_batched = create_agent(
    ToolCallingFake(),
    tools=[send_announcement],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_announcement": True})],
)

# A plain graph with a breakpoint before its last node.
stops_before_last = chain(State, ("first", first), ("last", last)).copy(
    update={"interrupt_before_nodes": ["last"]}
)

# LangChain v1's agent with a plain ToolNode and no review: its calls run as the model asks.
adder = create_agent(ToolCallingFake(), tools=[add])
