"""RunCore, the base of AgentsRun: the run's state (the task, its budget and timeouts, the
AgentState, the ledger, the SDK's tools) and its bookkeeping: events, usage, call ids, the
checkpoint, the fenced write (commit) and the checks made at every boundary."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agents import Agent, FunctionTool
from django.conf import settings

from agent.runtime.run import SessionClock, StopRun
from agent.runtime.watchdog import Watchdog
from agent.versions import version_bodies_unwritten, version_bodies_written, versions_current
from checkpoints.models import Blob, Checkpoint
from checkpoints.services import checkpoint_build, checkpoint_next_seq
from checkpoints.snapshots import snapshot_capture, snapshot_distrust
from harness_base import telemetry
from harness_base.config import harness_config
from tasks import services
from tasks.agent_state import AgentState
from tasks.events import EventType
from tasks.models import Task, ToolCall
from tasks.spec import TaskSpec
from tasks.states import LeaseLost

_LEDGER_FIELDS = [
    "arguments",
    "arguments_hash",
    "status",
    "result",
    "error_class",
    "error_message",
    "attempts",
    "started_at",
    "finished_at",
    "duration_ms",
]


class RunCore:
    """AgentsRun's state and bookkeeping: what every other part writes through."""

    def __init__(self, task: Task, worker_id: str, *, agent: Agent | None = None) -> None:
        self.registered = agent
        self.task = task
        self.task_id = task.id
        self.epoch = task.lease_epoch
        self.worker_id = worker_id
        self.spec = TaskSpec.model_validate(task.spec)
        self.config = harness_config()
        timeouts = self.config.timeouts
        budget = self.spec.budget
        self.session_s = budget.session_timeout_s or timeouts.session_s
        self.turn_s = budget.turn_timeout_s or timeouts.turn_s
        self.tool_s = budget.tool_timeout_s or timeouts.tool_s
        # Function tools running now (the SDK may run several at once): the last to end ends
        # the promise made to the worker for them.
        self.tools_running = 0
        self.session = SessionClock(task)
        self.human_wait_s = task.human_wait_s
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        self.cancel_seen = task.cancel_requested
        self.workspace = task.workspace_path
        self.state = AgentState()
        self.head_id: Any = task.head_checkpoint_id
        self.written_head: Any = task.head_checkpoint_id
        self.seq = checkpoint_next_seq(task_id=task.id)
        self.pending_events: list[Any] = []
        self.pending_rows: dict[str, ToolCall] = {}
        self.blobs: dict[str, Blob] = {}
        self.ledger: dict[str, ToolCall] = {}
        # SDK call id -> whether the tool itself asked for approval (its own needs_approval).
        self.sdk_asked: dict[str, bool] = {}
        self.tools_of: dict[str, FunctionTool] = {}
        # The agents' MCP servers (connected for the run) and their tools' risk by tool name.
        self.mcp_servers: list[Any] = []
        self.mcp_risk: dict[str, str] = {}
        # Serialises the wrapper's writes when the SDK runs several tools at once.
        self.write_lock: asyncio.Lock | None = None
        # For the metrics: the function tools the agents' code registered (the labels a call
        # may have; an MCP server's tools are `other`) and when the step being run began.
        self.tool_names: set[str] = set()
        self.step_began: float | None = None
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )
        # The run segment's `invoke_agent` span: the parent of the spans made in the SDK's
        # event loop.
        self.trace_parent = telemetry.current_parent()
        self.run_model: Any = None

    def step_event(self, type: str, payload: dict[str, Any]) -> None:
        self.pending_events.append(
            services.event_build(
                task_id=self.task_id, type=type, payload=payload, step_index=self.state.step_index
            )
        )

    def usage(self) -> dict[str, Any]:
        return {
            "current_step": self.state.step_index,
            "steps_used": self.state.budget.steps,
            "tokens_used": self.state.budget.tokens,
            "seconds_used": self.seconds_before + (time.monotonic() - self.run_started),
        }

    def call_id(self, sdk_call_id: str) -> str:
        return f"oa{self.sdk_branch()}:{sdk_call_id}"[:100]

    def sdk_branch(self) -> int:
        """The branch the call ids belong to: moved on by a rollback only (a retry or forward
        keeps the calls' ids, so what succeeded replays from the ledger)."""
        return int((self.state.sdk or {}).get("branch", 0))

    def checkpoint(self, *, trigger: str, level: str) -> Checkpoint:
        snapshot = snapshot_capture(workspace=self.workspace, defer=self.blobs)
        checkpoint = checkpoint_build(
            task_id=self.task_id,
            seq=self.seq,
            state=self.state,
            level=level,
            trigger=trigger,
            snapshot=snapshot,
            parent_id=self.head_id,
            versions=versions_current(self),
        )
        self.seq += 1
        self.head_id = checkpoint.id
        return checkpoint

    def commit(
        self,
        *,
        checkpoint: tuple[str, str] | None = None,
        rows: list[ToolCall] = (),
        fields: dict[str, Any] | None = None,
    ) -> None:
        """One fenced write: lease proof + heartbeat + usage + [a checkpoint with its new blobs]
        + the ledger rows changed since the last write + the events."""
        staged = [self.checkpoint(trigger=checkpoint[0], level=checkpoint[1])] if checkpoint else []
        update = {**self.usage(), **(fields or {})}
        if self.head_id != self.written_head:
            update["head_checkpoint_id"] = self.head_id
        changed = {row.call_id: row for row in [*self.pending_rows.values(), *rows]}
        try:
            self.cancel_seen = services.task_fenced_write(
                task_id=self.task_id,
                epoch=self.epoch,
                inserts_if_absent=[*self.blobs.values(), *version_bodies_unwritten(self)],
                inserts=[
                    *staged,
                    *(r for r in changed.values() if r._state.adding),
                    *self.pending_events,
                ],
                updates=[(r, _LEDGER_FIELDS) for r in changed.values() if not r._state.adding],
                **update,
            )
        except BaseException:
            if self.blobs:
                snapshot_distrust(self.workspace)
            raise
        for row in changed.values():
            row._state.adding = False
        version_bodies_written(self)
        self.blobs = {}
        self.pending_events = []
        self.pending_rows = {}
        self.written_head = self.head_id

    def boundary_checks(self) -> None:
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        if self.watchdog.cancel_requested.is_set() or self.cancel_seen:
            raise StopRun("canceled", "canceled by operator")
        elapsed = self.session.elapsed_s() - self.human_wait_s
        if elapsed > self.session_s:
            self.step_event(EventType.TIMEOUT, {"layer": "session", "limit_s": self.session_s})
            raise StopRun(
                "timeout", f"session timeout: {self.session_s:g}s exceeded (layer: session)"
            )
        if self.state.budget.steps >= self.spec.budget.max_steps:
            raise StopRun("budget_exceeded", f"max_steps={self.spec.budget.max_steps} reached")
