"""What a graph replay answers in the threads LangGraph runs nodes and tools in (NodeAnswers,
the base of agent.graph_runner.replay.GraphReplay, issue #47): a chat model's next recorded
decision, a ToolNode call answered from the recording or run and checked, and the divergence
kept for the run's own thread to raise.

The model's answers come through LangChain's LLM cache (`ReplayAnswers`, installed once per
process, wrapping any cache the operator set): a chat model looks there before it asks its
provider, and the cache answers only inside a replay's run (`replaying`: a context variable,
which LangGraph and LangChain carry into the threads they run nodes and tools in). The tool
calls go through a wrapper on each ToolNode of the graph (ToolNode's `wrap_tool_call`), which
passes through outside a replay."""

from __future__ import annotations

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

from agent.graph_runner.values import RESULT_MAX_CHARS, text
from agent.sdk_run.replay import SdkReplay, outcome_of
from tasks.models import ToolCallStatus

# A graph tool's risk when its metadata declares none: answered from the recording.
DEFAULT_RISK = "agent"

_REPLAYING: ContextVar[NodeAnswers | None] = ContextVar("harness_graph_replay", default=None)
_install_lock = threading.Lock()
# The ToolNodes whose calls go through a replay when one runs (once each, for the process).
_wrapped: weakref.WeakSet[ToolNode] = weakref.WeakSet()


class GraphReplayDiverged(Exception):
    """Raised in a node's thread where a replay diverged (its details are on the replay)."""


class NodeAnswers(SdkReplay):
    """A replay's answers to the graph's chat models and ToolNode calls, and the divergence
    found in a node's thread (kept: a ToolNode that handles tool errors would otherwise give
    it to the model as an answer)."""

    def __init__(self, setup: Any, *, turn: int) -> None:
        super().__init__(setup)
        self.turn = turn
        self.lock = threading.Lock()
        self.divergence: dict[str, Any] | None = None

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
        status = ToolCallStatus.FAILED if failed else ToolCallStatus.SUCCEEDED
        now = (status, text(content, RESULT_MAX_CHARS))
        if now != (was[0], text(was[1], RESULT_MAX_CHARS)):
            self.keep(**where, **self.changed(was, now), ran="yes")
        return result

    def keep(self, **divergence: Any) -> NoReturn:
        """The first divergence, for the run's thread; raised here to stop the node."""
        with self.lock:
            if self.divergence is None:
                self.divergence = divergence
        raise GraphReplayDiverged(divergence.get("reason", ""))


@contextmanager
def replaying(answers: NodeAnswers, graph: Any) -> Iterator[None]:
    """The model's answers and the tool wrapper installed, and `answers` the replay they
    serve in this context."""
    _install(graph)
    token = _REPLAYING.set(answers)
    try:
        yield
    finally:
        _REPLAYING.reset(token)


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
