"""Spans (agent/tracing.py) of a graph run (GraphRunTracing, part of GraphRun): what the
stream shows of tool attempts and model calls."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from agent.graph_runner.core import GraphRunCore
from agent.graph_runner.values import text
from agent.tracing import model_call, tool_started
from harness_base import telemetry
from tasks.models import ToolCall, ToolCallStatus


class GraphRunTracing(GraphRunCore):
    """GraphRun's spans: a reviewed call settled (call_traced), a node's model calls and
    unreviewed tool calls (node_traced)."""

    def call_traced(self, row: ToolCall) -> None:
        """A reviewed call, settled: its attempt from its delivery (at most this run's start)."""
        if not telemetry.enabled():
            return
        started = row.started_at.timestamp() * 1e9 if row.started_at else 0
        traced = tool_started(
            tool=row.tool,
            call_id=row.call_id,
            attempt=max(row.attempts, 1),
            arguments=row.arguments,
            start_ns=max(int(started), self.run_started_ns),
        )
        traced.finished(
            status=row.status,
            error_class=row.error_class if row.status == ToolCallStatus.FAILED else "",
            error_message=row.error_message,
            result=row.result,
        )
        traced.end()

    def node_traced(self, messages: list[Any], settled: set[str], started: float | None) -> None:
        """A node's new AIMessages that report token usage are `chat` spans and its tool messages
        that settled no reviewed call are `execute_tool` spans (gen_ai.tool.call.id: the tool
        call id of the graph), each as long as the node ran."""
        now = time.monotonic()
        start_ns = time.time_ns() - int((now - started) * 1e9) if started is not None else None
        for message in messages:
            if (
                isinstance(message, AIMessage)
                and message.usage_metadata
                and (message.id is None or message.id not in self.chats_traced)
            ):
                if message.id is not None:
                    self.chats_traced.add(message.id)
                meta = message.response_metadata or {}
                usage = message.usage_metadata
                model = str(meta.get("model_name") or meta.get("model") or "")
                model_call(
                    provider=meta.get("model_provider"), model=model, start_ns=start_ns
                ).ended(
                    input_tokens=usage.get("input_tokens"),
                    output_tokens=usage.get("output_tokens"),
                    finish_reason=str(
                        meta.get("finish_reason")
                        or ("tool_calls" if message.tool_calls else "stop")
                    ),
                    response_model=model,
                )
            elif isinstance(message, ToolMessage) and message.tool_call_id not in settled:
                failed = message.status == "error"
                traced = tool_started(
                    tool=str(message.name or ""),
                    call_id=message.tool_call_id,
                    attempt=1,
                    arguments=None,
                    start_ns=start_ns,
                )
                traced.finished(
                    status=ToolCallStatus.FAILED if failed else ToolCallStatus.SUCCEEDED,
                    error_class="tool_error" if failed else "",
                    error_message=text(message.content) if failed else "",
                    result=message.content,
                )
                traced.end()
