"""The state of one graph run and its writes (GraphRunCore, the base of GraphRun, on
agent.sdk_run's ForeignRun: the lease, clocks, events, usage, the stop ladder): its saver and
config; one fenced write (commit); a pause for review (pause: commit, then waiting_review)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NoReturn

from django.db import transaction

from agent.graph_runner.loading import GraphNotRegistered, graph_load, graph_thread_config
from agent.graph_runner.model_calls import NodeModelCalls
from agent.graph_runner.replay import GraphReplay
from agent.runtime.run import Paused
from agent.sdk_run import ForeignRun
from checkpoints.langgraph import DjangoCheckpointSaver
from harness_base.config import harness_config, langgraph_entry
from tasks import services
from tasks.events import EventType
from tasks.models import Task, TaskEvent, ToolCall
from tasks.spec import LangGraphAgentSpec

REVIEW_KIND = "langgraph"


class GraphRunCore(ForeignRun):
    """GraphRun's state and its one write: commit, pause."""

    NOUN = "graph"
    NAME_KEY = "graph"
    NOT_REGISTERED = (GraphNotRegistered, ImportError, AttributeError)
    load_code = staticmethod(graph_load)

    def __init__(self, task: Task, worker_id: str, *, loaded: Any = None) -> None:
        super().__init__(task, worker_id, loaded=loaded)
        budget = self.spec.budget
        # LangGraph's step_timeout: the turn timeout bounds one super-step.
        self.step_s = self.turn_s
        self.steps_used = task.steps_used
        # The tokens its nodes' chat models reported (model_calls), against budget.max_tokens.
        self.tokens_used = task.tokens_used
        self.step_index = task.current_step
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
        # The chat model calls the nodes make (model_calls), and the last turn's number.
        self.model_calls = NodeModelCalls()
        self.turn_index = TaskEvent.objects.filter(
            task_id=task.id, type=EventType.MODEL_DECISION
        ).count()
        self.config: dict[str, Any] = {
            **graph_thread_config(task_id=task.id),
            "recursion_limit": budget.max_steps + 10,
            "callbacks": [self.model_calls],
        }
        registered = harness_config().langgraph_graphs.get(self.graph_spec.graph)
        self.interrupt_resume = (
            langgraph_entry(registered).interrupt_resume if registered else "envelope"
        )
        self.config["configurable"]["harness_workspace"] = str(self.workspace)
        # LangGraph checkpoint ids whose workspace snapshot is stored (or known to be).
        self.snapshotted: set[str] = set()
        # A replay of a saved case: its recorded decisions and tool answers (replay).
        self.replay = GraphReplay.of(task)

    @property
    def graph_spec(self) -> LangGraphAgentSpec:
        """The task's `agent`: a LangGraph graph's (agent.jobs runs only those here)."""
        agent = self.spec.agent
        assert isinstance(agent, LangGraphAgentSpec), f"not a LangGraph task: {agent!r}"
        return agent

    def model_calls_recorded(self) -> None:
        """The model calls the nodes made since the last look, each a model_decision."""
        for ended, decision in self.model_calls.take():
            self.turn_index += 1
            self.tokens_used += decision["prompt_tokens"] + decision["completion_tokens"]
            self.event(EventType.MODEL_DECISION, {"turn": self.turn_index, **decision}, at=ended)

    def commit(self, *, inserts: Sequence[Any] = (), **fields: Any) -> None:
        """One fenced write: lease proof + heartbeat + usage + this step's events (+ rows,
        + the tool calls settled since the last write)."""
        self.model_calls_recorded()
        self.cancel_seen = services.task_fenced_write(
            task_id=self.task_id,
            epoch=self.epoch,
            inserts=[*inserts, *self.pending_events],
            updates=[(row, sorted(names)) for row, names in self.pending_calls.values()],
            **{**self.usage(), **fields},
        )
        self.pending_events = []
        self.pending_calls = {}

    def write_then(self, then: Any, *, inserts: Sequence[Any] = ()) -> None:
        with transaction.atomic():
            self.commit(inserts=list(inserts))
            then()

    def pause(self, *, reason: str, inserts: Sequence[Any] = (), then: Any = None) -> NoReturn:
        def transition() -> None:
            if then is not None:
                then()
            self.wait_for_review(reason)

        self.write_then(transition, inserts=inserts)
        raise Paused()
