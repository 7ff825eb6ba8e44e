"""The state of one graph run and its writes (GraphRunCore, the base of GraphRun): the
run's budget, clocks and lease epoch, its saver and config; events and usage saved by one
fenced write (commit); a pause for review (pause: commit, then waiting_review)."""

from __future__ import annotations

import time
from typing import Any, NoReturn

from django.conf import settings
from django.db import transaction

from agent.graph_runner.loading import graph_thread_config
from agent.runtime.run import Paused, SessionClock
from agent.runtime.watchdog import Watchdog
from checkpoints.langgraph import DjangoCheckpointSaver
from harness_base.config import harness_config, langgraph_entry
from tasks import services
from tasks.models import Task, ToolCall
from tasks.spec import TaskSpec
from tasks.states import TaskStatus

REVIEW_KIND = "langgraph"


class GraphRunCore:
    """GraphRun's state and its one write: event, usage, commit, pause."""

    def __init__(self, task: Task, worker_id: str, *, graph: Any = None) -> None:
        self.graph = graph
        self.task = task
        self.task_id = task.id
        self.epoch = task.lease_epoch
        self.worker_id = worker_id
        self.spec = TaskSpec.model_validate(task.spec)
        timeouts = harness_config().timeouts
        budget = self.spec.budget
        self.session_s = budget.session_timeout_s or timeouts.session_s
        self.step_s = budget.turn_timeout_s or timeouts.turn_s
        self.session = SessionClock(task)
        self.human_wait_s = task.human_wait_s
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        self.steps_used = task.steps_used
        self.step_index = task.current_step
        self.cancel_seen = task.cancel_requested
        self.pending_events: list[Any] = []
        # ToolCall rows whose outcome the next fenced write saves: {pk: (row, fields)}.
        self.pending_calls: dict[int, tuple[ToolCall, set[str]]] = {}
        # Graph calls whose decision the graph was resumed with, outcome not known yet:
        # {pk: (row, interrupt meta)}. Settled by the tool's result, by the super-step that
        # consumed the decision (a plain interrupt), or when the run ends.
        self.delivered: dict[int, tuple[ToolCall, dict[str, Any]]] = {}
        self.head_at_start: str | None = None
        self.node_started: dict[str, float] = {}
        # For the metrics: the tools the graph's ToolNodes hold (the labels a tool call may
        # have) and when the super-step being run began (the last checkpoint streamed).
        self.tool_names: frozenset[str] = frozenset()
        self.step_began = time.monotonic()
        self.run_started_ns = time.time_ns()
        # Ids of the AIMessages traced as `chat` spans, or in the state this run resumed from
        # (a middleware's node writes its model's message again).
        self.chats_traced: set[str] = set()
        self.saver = DjangoCheckpointSaver(task_id=task.id, epoch=self.epoch)
        self.config = {
            **graph_thread_config(task_id=task.id),
            "recursion_limit": budget.max_steps + 10,
        }
        self.workspace = task.workspace_path
        registered = harness_config().langgraph_graphs.get(self.spec.agent.graph)
        self.interrupt_resume = (
            langgraph_entry(registered).interrupt_resume if registered else "envelope"
        )
        self.config["configurable"]["harness_workspace"] = str(self.workspace)
        # LangGraph checkpoint ids whose workspace snapshot is stored (or known to be).
        self.snapshotted: set[str] = set()
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )

    def event(self, type: str, payload: dict[str, Any]) -> None:
        self.pending_events.append(
            services.event_build(
                task_id=self.task_id, type=type, payload=payload, step_index=self.step_index
            )
        )

    def usage(self) -> dict[str, Any]:
        return {
            "current_step": self.step_index,
            "steps_used": self.steps_used,
            "seconds_used": self.seconds_before + (time.monotonic() - self.run_started),
        }

    def commit(self, *, inserts: list[Any] = (), **fields: Any) -> None:
        """One fenced write: lease proof + heartbeat + usage + this step's events (+ rows,
        + the tool calls settled since the last write)."""
        self.cancel_seen = services.task_fenced_write(
            task_id=self.task_id,
            epoch=self.epoch,
            inserts=[*inserts, *self.pending_events],
            updates=[(row, sorted(names)) for row, names in self.pending_calls.values()],
            **{**self.usage(), **fields},
        )
        self.pending_events = []
        self.pending_calls = {}

    def pause(self, *, reason: str, inserts: list[Any] = (), then: Any = None) -> NoReturn:
        with transaction.atomic():
            self.commit(inserts=list(inserts))
            if then is not None:
                then()
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.WAITING_REVIEW,
                expect_epoch=self.epoch,
                reason=reason[:500],
                fields={"worker_id": ""},
            )
        raise Paused()
