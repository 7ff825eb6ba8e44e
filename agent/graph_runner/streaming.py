"""Streaming the graph's super-steps (GraphRunStreaming, part of GraphRun): each
checkpoint one fenced write of its events and workspace snapshot, each node run and tool
result an event (and a metric); between super-steps the lease, cancel, session timeout and
step budget are checked (ForeignRun.boundary_checks)."""

from __future__ import annotations

import time
from typing import Any

from langgraph.prebuilt import ToolNode

from agent.graph_runner.calls import GraphRunCalls
from agent.graph_runner.values import full_text, jsonable, text
from agent.graph_runner.workspace import GraphRunWorkspace
from agent.runtime.attempt import tool_attempt_record, tool_label_known
from harness_base import telemetry
from harness_base.metrics import STEP_SECONDS, metric_observe
from tasks import beacon
from tasks.events import EventType


class GraphRunStreaming(GraphRunCalls, GraphRunWorkspace):
    """GraphRun's stream: stream, record_super_step, record_node, record_tool_result."""

    def stream(self, graph: Any, first: Any) -> None:
        # Nodes are handed the workspace as configurable `harness_workspace`: it exists before
        # the first of them runs.
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.commit()
        # Each super-step is bounded by step_timeout (the turn timeout): the run promises its
        # worker to be heard from within that, again after everything the stream yields.
        beacon.expect("turn", self.step_s)
        self.tool_names = frozenset(
            name
            for node in graph.nodes.values()
            if isinstance(getattr(node, "bound", None), ToolNode)
            for name in node.bound.tools_by_name
        )
        self.step_began = time.monotonic()
        for mode, chunk in graph.stream(
            first, self.config, stream_mode=["checkpoints", "tasks"], durability="sync"
        ):
            if mode == "tasks" and "result" not in chunk:
                self.node_started[chunk["id"]] = time.monotonic()
            elif mode == "tasks":
                self.record_node(chunk)
                if self.replay is not None:
                    self.replay.diverged_check(self)
            elif mode == "checkpoints":
                self.record_super_step(chunk)
                self.boundary_checks()
            beacon.expect("turn", self.step_s)
        beacon.progress()

    def record_super_step(self, chunk: dict[str, Any]) -> None:
        metadata = chunk.get("metadata") or {}
        step = int(metadata.get("step", 0))
        now = time.monotonic()
        if metadata.get("source") == "loop" and step > 0:
            self.steps_used += 1
            metric_observe(STEP_SECONDS, now - self.step_began)
        self.step_began = now
        self.step_index = max(step, 0)
        checkpoint_id = chunk["config"]["configurable"]["checkpoint_id"]
        snapshot = self.workspace_snapshot(checkpoint_id)
        if checkpoint_id != self.head_at_start:
            self.calls_settle()  # a super-step after the resume: plain decisions consumed
        self.event(
            EventType.GRAPH_STEP,
            {
                "checkpoint_id": checkpoint_id,
                "step": step,
                "source": metadata.get("source"),
                "parents": metadata.get("parents") or {},
                "next": list(chunk.get("next") or []),
                **({"workspace_files": snapshot[0].snapshot["files"]} if snapshot else {}),
            },
        )
        self.commit(inserts=snapshot)

    def record_node(self, chunk: dict[str, Any]) -> None:
        # The node's model calls ended before its result: their decisions come first.
        self.model_calls_recorded()
        result = chunk.get("result")
        writes = result if isinstance(result, dict) else {}
        messages = writes.get("messages")
        messages = messages if isinstance(messages, list) else []
        started = self.node_started.pop(chunk["id"], None)
        seconds = time.monotonic() - started if started else 0.0
        error = chunk.get("error")
        self.event(
            EventType.GRAPH_NODE,
            {
                "node": chunk["name"],
                "graph_task_id": chunk["id"],
                "duration_ms": round(seconds * 1000, 3),
                "error_class": type(error).__name__ if error else "",
                "error": text(error) if error else "",
                "writes": sorted(str(k) for k in writes),
                "interrupts": len(chunk.get("interrupts") or []),
                # the tools this node ran (a ToolNode's results)
                "tool": ", ".join(
                    str(getattr(m, "name", ""))
                    for m in messages
                    if getattr(m, "type", "") == "tool"
                ),
            },
        )
        settled: set[str] = set()
        for message in messages:
            for call in getattr(message, "tool_calls", None) or []:
                self.event(
                    EventType.GRAPH_TOOL_CALL,
                    {
                        "node": chunk["name"],
                        "tool": call.get("name"),
                        "tool_call_id": call.get("id"),
                        "arguments": jsonable(call.get("args")),
                    },
                )
            if getattr(message, "type", "") == "tool":
                self.record_tool_result(message, seconds)
                if self.calls_settle(message=message) is not None:
                    settled.add(getattr(message, "tool_call_id", ""))
                shown = text(message.content)
                self.event(
                    EventType.GRAPH_TOOL_RESULT,
                    {
                        "node": chunk["name"],
                        "tool": getattr(message, "name", ""),
                        "tool_call_id": getattr(message, "tool_call_id", ""),
                        "status": getattr(message, "status", "success"),
                        "content": shown,
                        # A longer answer whole, for a replay of a case to give back.
                        **full_text("content_full", message.content, shown),
                    },
                )
        if telemetry.enabled():
            self.node_traced(messages, settled, started)

    def record_tool_result(self, message: Any, seconds: float) -> None:
        """A ToolNode's result in the metrics, like an attempt of the harness's own loop. The
        node runs its calls together and reports no time per call: each is given the node's.
        An error result is a call the ToolNode refused or whose error it caught (bad
        arguments, an unknown tool): `permanent`. A tool whose exception fails the node
        leaves no result, and counts as the node's failure only."""
        failed = getattr(message, "status", "success") == "error"
        tool_attempt_record(
            tool=tool_label_known(getattr(message, "name", ""), self.tool_names),
            seconds=seconds,
            error_class="permanent" if failed else "",
        )
