"""A graph task replaying a saved case (GraphReplay, issue #47), on the SDK agents' replay
(agent.sdk_run.replay): the chat models of the graph's nodes are answered with the recorded
model decisions in turn order, and its ToolNodes' calls are matched with the recorded ones by
the same oracle; a tool whose effect stays in the replay's own workspace (`risk` `read` or
`write` in the LangChain tool's metadata, or `replay: live`) runs and its answer is checked,
any other is answered from the recording without running.

The model's answers come through LangChain's LLM cache (`ReplayAnswers`, installed once per
process, wrapping any cache the operator set): a chat model looks there before it asks its
provider, and the cache answers only inside a replay's run (a context variable the run sets,
which LangGraph and LangChain carry into the threads they run nodes and tools in). The tool
calls go through a wrapper on each ToolNode of the graph (ToolNode's `wrap_tool_call`), which
passes through outside a replay. What diverges in a node's thread is kept and raised by the
run's own thread (`diverged_check`): a ToolNode that handles tool errors would otherwise give
it to the model as an answer."""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn

from langchain_core.caches import BaseCache
from langchain_core.globals import get_llm_cache, set_llm_cache
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel
from langgraph.types import Command

from agent.graph_runner.values import text
from agent.sdk_run.replay import SdkReplay, outcome_of
from cases.selectors import replay_setup
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import Task, TaskEvent, ToolCallStatus

# A graph tool's risk when its metadata declares none: answered from the recording.
DEFAULT_RISK = "agent"

_REPLAYING: ContextVar[GraphReplay | None] = ContextVar("harness_graph_replay", default=None)
_install_lock = threading.Lock()
# The ToolNodes whose calls go through a replay when one runs (once each, for the process).
_wrapped: weakref.WeakSet[ToolNode] = weakref.WeakSet()


class GraphReplayDiverged(Exception):
    """Raised in a node's thread where a replay diverged (its details are on the replay)."""


class GraphReplay(SdkReplay):
    """The replay of a graph task: the recorded decisions answered in turn order, the tool
    oracle, the divergence found in a node's thread."""

    def __init__(self, setup: Any, *, turn: int, resumed: int = 0) -> None:
        super().__init__(setup)
        self.tool_nodes: tuple[str, ...] = setup.tool_nodes
        self.resumes: tuple[dict[str, Any], ...] = setup.graph_resumes
        # The pauses for review this replay has resumed (a resumed replay: its earlier ones).
        self.resumed = resumed
        self.turn = turn
        self.lock = threading.Lock()
        self.divergence: dict[str, Any] | None = None

    @classmethod
    def of(cls, task: Task) -> GraphReplay | None:
        setup = replay_setup(task_id=task.id) if task.is_replay else None
        if setup is None:
            return None
        # A resumed replay: the calls its graph already ran, and the turns already answered.
        made = [(tool, canonical_hash(args)) for tool, args in _graph_calls_made(task_id=task.id)]
        events = TaskEvent.objects.filter(task_id=task.id)
        return cls(
            dataclasses.replace(setup, made=[*setup.made, *made]),
            turn=events.filter(type=EventType.MODEL_DECISION).count(),
            resumed=events.filter(type=EventType.GRAPH_RESUMED).count(),
        )

    def position(self, run: Any) -> tuple[int, int]:
        return run.turn_index, run.step_index

    # --- in the run's thread -----------------------------------------------------------------

    @contextmanager
    def playing(self, run: Any, graph: Any) -> Iterator[None]:
        """Around the graph's stream: the graph checked (`refuse_unanswerable`), the model's
        answers and the tool wrapper installed, and this replay the one they serve."""
        self.refuse_unanswerable(run, graph)
        _install(graph)
        token = _REPLAYING.set(self)
        try:
            yield
        finally:
            _REPLAYING.reset(token)

    def refuse_unanswerable(self, run: Any, graph: Any) -> None:
        """A graph whose recorded tool results came from a node that is not a ToolNode, or
        that has subgraphs, stops before it starts: a replay could not answer those calls
        without running them."""
        tool_nodes = {
            name
            for name, node in graph.nodes.items()
            if isinstance(getattr(node, "bound", None), ToolNode)
        }
        outside = sorted(set(self.tool_nodes) - tool_nodes)
        nested = sorted(
            name for name, node in graph.nodes.items() if isinstance(node.bound, Pregel)
        )
        if not outside and not nested:
            return
        reason = (
            f"node(s) {', '.join(outside)} ran tools outside a ToolNode"
            if outside
            else f"node(s) {', '.join(nested)} are subgraphs"
        )
        raise self.diverged(
            run,
            call_id="",
            tool="",
            args={},
            reason=f"{reason}: a replay cannot answer their calls without running them",
        )

    def resume(self, run: Any, state: Any, *, at_breakpoint: bool) -> tuple[bool, Any]:
        """Where the graph stopped (its state): (False, None) when it finished; else (True,
        the input that goes on: None after a crash, or the recorded answers of this pause for
        review, in the order the graph asks (a breakpoint's approval: None). A pause the
        recording did not have, or whose interrupts are not those it answered, is the
        divergence: a replay never waits for a person."""
        if not state.interrupts and not state.next:
            return False, None
        if not state.interrupts and not at_breakpoint:
            return True, None  # stopped mid-run (a crash): it goes on from its checkpoint
        where: dict[str, Any] = {"call_id": "", "tool": "", "args": {}}
        if self.resumed >= len(self.resumes):
            raise self.diverged(
                run, **where, reason="the graph stopped for a review the recording did not have"
            )
        recorded = self.resumes[self.resumed]
        checkpoint_id = state.config["configurable"]["checkpoint_id"]
        if state.interrupts:
            answers = recorded.get("answers")
            if answers is None or len(answers) != len(state.interrupts):
                reason = (
                    f"the graph stopped for {len(state.interrupts)} interrupt(s); the recording "
                    + (
                        "resumed a breakpoint there"
                        if answers is None
                        else f"answered {len(answers)}"
                    )
                )
                raise self.diverged(run, **where, reason=reason)
            value: Any = Command(
                resume={i.id: answer for i, answer in zip(state.interrupts, answers, strict=True)}
            )
        else:
            if not recorded.get("breakpoint"):
                raise self.diverged(
                    run,
                    **where,
                    reason="the graph stopped at a breakpoint; the recording answered interrupts",
                )
            value = None
        self.resumed += 1
        run.event(
            EventType.GRAPH_RESUMED,
            {"checkpoint_id": checkpoint_id, "replayed": True, **recorded},
        )
        return True, value

    def diverged_check(self, run: Any) -> None:
        """Raise the divergence a node's thread found (on the run's timeline)."""
        if self.divergence is not None:
            raise self.diverged(run, **self.divergence)

    # --- in a node's thread ------------------------------------------------------------------

    def model_answer(self) -> list[ChatGeneration] | None:
        """The next recorded model decision, as a chat model's generation (None: the replay
        plays no recorded decisions, the model is asked)."""
        if not self.decisions:
            return None
        with self.lock:
            self.turn += 1
            turn = self.turn
        decision = self.decisions.get(turn)
        if decision is None:
            reason = (
                f"the graph asked its model for turn {turn}; the recording has "
                f"{len(self.decisions)} turns"
            )
            self.keep(call_id="", tool="", args={}, reason=reason)
        message = AIMessage(
            content=decision.get("text_full") or decision.get("text") or "",
            tool_calls=[
                {"name": c["tool"], "args": c.get("args") or {}, "id": c.get("tool_call_id")}
                for c in decision.get("calls") or []
            ],
            response_metadata={"model_name": f"replay:case {self.case_name}"[:100]},
        )
        return [ChatGeneration(message=message)]

    def tool_call(self, request: Any, execute: Callable[[Any], Any]) -> Any:
        """A ToolNode's call: answered from the recording, or run and checked against it."""
        call = request.tool_call
        tool, args = str(call["name"]), call.get("args") or {}
        where = {"call_id": str(call.get("id") or ""), "tool": tool, "args": args}
        with self.lock:
            recorded = self.oracle.claim(tool=tool, args=args)
        if recorded is None:
            self.keep(**where, reason=f"no recorded call of {tool} with these arguments")
        was = outcome_of(
            recorded["status"], recorded.get("result"), recorded.get("error_message") or ""
        )
        metadata = getattr(request.tool, "metadata", None)
        if not self.live(metadata, DEFAULT_RISK):
            if was[0] not in (ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED):
                reason = f"the recording has no outcome a replay can give for this call ({was[0]})"
                self.keep(**where, reason=reason)
            failed = was[0] == ToolCallStatus.FAILED
            return ToolMessage(
                content=str(was[1]),
                name=tool,
                tool_call_id=call.get("id"),
                status="error" if failed else "success",
            )
        result = execute(request)
        content = getattr(result, "content", result)
        failed = getattr(result, "status", "success") == "error"
        now = (ToolCallStatus.FAILED if failed else ToolCallStatus.SUCCEEDED, text(content, 5000))
        if now != (was[0], text(was[1], 5000)):
            self.keep(**where, **self.changed(was, now), ran="yes")
        return result

    def keep(self, **divergence: Any) -> NoReturn:
        """The first divergence, for the run's thread; raised here to stop the node."""
        with self.lock:
            if self.divergence is None:
                self.divergence = divergence
        raise GraphReplayDiverged(divergence.get("reason", ""))


def _install(graph: Any) -> None:
    """The model's answers on this process (LangChain's LLM cache, wrapping the one set) and
    the tool wrapper on the graph's ToolNodes, once each: outside a replay they pass through."""
    with _install_lock:
        cache = get_llm_cache()
        if not isinstance(cache, ReplayAnswers):
            set_llm_cache(ReplayAnswers(inner=cache))
        for node in graph.nodes.values():
            tools = getattr(node, "bound", None)
            if isinstance(tools, ToolNode) and tools not in _wrapped:
                tools._wrap_tool_call = _replayed_calls(tools._wrap_tool_call)
                _wrapped.add(tools)


def _graph_calls_made(*, task_id: Any) -> list[tuple[str, Any]]:
    """(tool, arguments) of the calls a graph task's ToolNodes answered, in order."""
    events = TaskEvent.objects.filter(
        task_id=task_id, type__in=(EventType.GRAPH_TOOL_CALL, EventType.GRAPH_TOOL_RESULT)
    ).order_by("id")
    asked: dict[str, list[tuple[str, Any]]] = {}
    made = []
    for type_, payload in events.values_list("type", "payload"):
        key = str(payload.get("tool_call_id") or "")
        if type_ == EventType.GRAPH_TOOL_CALL:
            asked.setdefault(key, []).append((str(payload.get("tool")), payload.get("arguments")))
        elif asked.get(key):
            made.append(asked[key].pop(0))
    return made


def _replayed_calls(inner: Callable[..., Any] | None) -> Callable[..., Any]:
    """A ToolNode's wrap_tool_call: a replay's calls through the replay, others through
    `inner` (the ToolNode's own wrapper, if it had one) or straight to the tool."""

    def wrapped(request: Any, execute: Callable[[Any], Any]) -> Any:
        def run(req: Any) -> Any:
            return inner(req, execute) if inner is not None else execute(req)

        replay = _REPLAYING.get()
        return run(request) if replay is None else replay.tool_call(request, run)

    return wrapped


class ReplayAnswers(BaseCache):
    """LangChain's LLM cache, answering a replay's chat models with the recorded decisions;
    outside a replay, the cache it wraps (if any), else nothing."""

    def __init__(self, inner: BaseCache | None = None) -> None:
        self.inner = inner

    def lookup(self, prompt: str, llm_string: str) -> Any:
        replay = _REPLAYING.get()
        if replay is not None:
            return replay.model_answer()
        return self.inner.lookup(prompt, llm_string) if self.inner is not None else None

    def update(self, prompt: str, llm_string: str, return_val: Any) -> None:
        if _REPLAYING.get() is None and self.inner is not None:
            self.inner.update(prompt, llm_string, return_val)

    def clear(self, **kwargs: Any) -> None:
        if self.inner is not None:
            self.inner.clear(**kwargs)
