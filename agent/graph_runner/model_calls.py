"""The model calls made inside a graph's nodes (NodeModelCalls, LangChain's callbacks in the run's
config, which every chat model a node invokes inherits): each call that ends is a model
decision (`model_decision`, as the SDK agents' and the harness's own loop's: its node, model,
time, tokens, the tool calls it asks for and its text), on the timeline as a model bar. The
handler runs in whatever thread LangGraph runs the node in; it only collects, and the run
records what it collected from its own thread, with the node's result
(agent.graph_runner.streaming)."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any
from uuid import UUID

from django.utils import timezone
from langchain_core.callbacks import BaseCallbackHandler

from agent.graph_runner.values import full_text, jsonable, text

# A decision's text as the SDK agents keep it on theirs.
DECISION_TEXT_CHARS = 2000


class NodeModelCalls(BaseCallbackHandler):
    """Chat model calls, started and ended (LangChain's callback API)."""

    def __init__(self) -> None:
        # run id -> (when it started, the node it runs in); the calls that ended, in order,
        # each with when it ended.
        self.started: dict[UUID, tuple[float, str]] = {}
        self.ended: list[tuple[datetime, dict[str, Any]]] = []
        # Nodes of one super-step run in threads of their own: one may end a call while the
        # run takes what ended.
        self.lock = threading.Lock()

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        node = str((metadata or {}).get("langgraph_node") or "")
        self.started[run_id] = (time.monotonic(), node)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        began = self.started.pop(run_id, None)
        if began is None:  # a completion model's call (on_llm_start): no chat message
            return
        generations = getattr(response, "generations", None) or [[]]
        message = getattr(generations[0][0], "message", None) if generations[0] else None
        if message is None:
            return
        decision = _decision(message, node=began[1], seconds=time.monotonic() - began[0])
        with self.lock:
            self.ended.append((timezone.now(), decision))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.started.pop(run_id, None)

    def take(self) -> list[tuple[datetime, dict[str, Any]]]:
        """The calls that ended since the last take, oldest first: (when, decision)."""
        with self.lock:
            ended, self.ended = self.ended, []
        return ended


def _decision(message: Any, *, node: str, seconds: float) -> dict[str, Any]:
    usage = getattr(message, "usage_metadata", None) or {}
    meta = getattr(message, "response_metadata", None) or {}
    content = getattr(message, "content", "")
    shown = text(content, DECISION_TEXT_CHARS)
    return {
        "node": node,
        "model": str(meta.get("model_name") or meta.get("model") or ""),
        "duration_ms": round(seconds * 1000, 3),
        "prompt_tokens": int(usage.get("input_tokens") or 0),
        "completion_tokens": int(usage.get("output_tokens") or 0),
        "calls": [
            {
                "tool": str(call.get("name") or ""),
                "tool_call_id": str(call.get("id") or ""),
                "args": jsonable(call.get("args") or {}),
            }
            for call in getattr(message, "tool_calls", None) or []
        ],
        "text": shown,
        # A longer answer whole (up to the result's bound), for a replay to give.
        **full_text("text_full", content, shown),
    }
