"""The base of PydanticAIRun (RunCore): a run segment's state as loaded from its task (the
lease epoch, timeouts, the agent state, the head checkpoint, the ledger, the watchdog),
its events and usage, its one way to write (`commit`: fenced, optionally a checkpoint),
the checks between nodes (`boundary_checks`) and a call's ledger id (`call_id`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from django.conf import settings
from django.db import transaction

from agent.runtime.run import SessionClock, StopRun
from agent.runtime.watchdog import Watchdog
from agent.versions import version_bodies_unwritten, version_bodies_written, versions_current
from checkpoints.services import checkpoint_build, checkpoint_next_seq
from checkpoints.snapshots import snapshot_capture
from harness_base import telemetry
from harness_base.config import harness_config
from tasks import services
from tasks.agent_state import AgentState
from tasks.events import EventType
from tasks.models import Task, ToolCall
from tasks.spec import TaskSpec
from tasks.states import LeaseLost


class RunCore:
    """A run segment's state, events and fenced writes: every part of PydanticAIRun
    builds on it."""

    def __init__(self, task: Task, worker_id: str, *, agent: Any = None) -> None:
        self.agent = agent
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
        self.session = SessionClock(task)
        self.human_wait_s = task.human_wait_s
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        self.cancel_seen = task.cancel_requested
        self.workspace = task.workspace_path
        self.state = AgentState()
        self.head_id: Any = task.head_checkpoint_id
        self.seq = checkpoint_next_seq(task_id=task.id)
        self.pending_events: list[Any] = []
        # call_id -> this task's ledger row (loaded when the run starts).
        self.ledger: dict[str, ToolCall] = {}
        # A retry re-runs the calls that failed (others replay).
        self.rerun_failed = False
        # For the metrics: the function tools the agent's code registered (the labels a call
        # may have; an MCP server's tools are `other`) and when the step being run began.
        self.tool_names: frozenset[str] = frozenset()
        self.step_began = time.monotonic()
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )
        # The run segment's `invoke_agent` span: the parent of the spans made in the agent's
        # event loop (another thread).
        self.trace_parent = telemetry.current_parent()

    @property
    def sdk(self) -> dict[str, Any]:
        return self.state.sdk  # type: ignore[return-value]

    def event(self, type: str, payload: dict[str, Any]) -> None:
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

    def commit(
        self,
        *,
        trigger: str | None = None,
        inserts: list[Any] = (),
        updates: list[tuple[Any, list[str]]] = (),
        then: Callable[[Any], None] | None = None,
        fields: dict[str, Any] | None = None,
    ) -> Any:
        """One fenced write: lease proof + heartbeat + usage + events (+ rows) [+ the
        checkpoint of `trigger`: the state with the message history and a workspace snapshot,
        made head]; `then(checkpoint)` runs last in the same transaction."""
        checkpoint = None
        update = {**self.usage(), **(fields or {})}
        if trigger is not None:
            configured = self.config.trigger(trigger)
            checkpoint = checkpoint_build(
                task_id=self.task_id,
                seq=self.seq,
                state=self.state,
                level=configured.level if configured else "step",
                trigger=trigger,
                snapshot=snapshot_capture(workspace=self.workspace),
                parent_id=self.head_id,
                versions=versions_current(self),
            )
            self.seq += 1
            self.head_id = checkpoint.id
            update["head_checkpoint_id"] = checkpoint.id
        with transaction.atomic() if then is not None else nullcontext():
            self.cancel_seen = services.task_fenced_write(
                task_id=self.task_id,
                epoch=self.epoch,
                inserts=[*([checkpoint] if checkpoint else []), *inserts, *self.pending_events],
                inserts_if_absent=version_bodies_unwritten(self),
                updates=list(updates),
                **update,
            )
            self.pending_events = []
            if then is not None:
                then(checkpoint)
        version_bodies_written(self)
        return checkpoint

    def boundary_checks(self, *, model_next: bool) -> None:
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        if self.watchdog.cancel_requested.is_set() or self.cancel_seen:
            raise StopRun("canceled", "canceled by operator")
        elapsed = self.session.elapsed_s() - self.human_wait_s
        if elapsed > self.session_s:
            self.event(EventType.TIMEOUT, {"layer": "session", "limit_s": self.session_s})
            raise StopRun(
                "timeout", f"session timeout: {self.session_s:g}s exceeded (layer: session)"
            )
        budget = self.spec.budget
        if model_next and self.state.budget.steps >= budget.max_steps:
            raise StopRun("budget_exceeded", f"max_steps={budget.max_steps} reached")
        if self.state.budget.tokens > budget.max_tokens:
            raise StopRun(
                "budget_exceeded",
                f"max_tokens={budget.max_tokens} exceeded ({self.state.budget.tokens})",
            )

    def call_id(self, tool_call_id: str) -> str:
        return f"{self.sdk['gen']}.{self.state.step_index}.{tool_call_id}"[:100]
