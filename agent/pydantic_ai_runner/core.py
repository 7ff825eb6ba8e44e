"""The base of PydanticAIRun (RunCore, on agent.sdk_run's SdkRun: the lease, clocks, agent
state, events, usage, the checks between nodes, the stop ladder): its one way to write
(`commit`: fenced, optionally a checkpoint; `write_then`) and a call's ledger id (`call_id`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from django.db import transaction

from agent.pydantic_ai_runner.agents import AgentNotRegistered, agent_load
from agent.pydantic_ai_runner.messages import MessagesDumped
from agent.sdk_run import SdkRun
from agent.sdk_run.replay import SdkReplay
from agent.versions import version_bodies_unwritten, version_bodies_written
from tasks import services
from tasks.models import Task


class RunCore(SdkRun):
    """A run segment's state, events and fenced writes: every part of PydanticAIRun
    builds on it."""

    NOT_REGISTERED = (AgentNotRegistered, ImportError, AttributeError)
    load_code = staticmethod(agent_load)

    def __init__(self, task: Task, worker_id: str, *, loaded: Any = None) -> None:
        super().__init__(task, worker_id, loaded=loaded)
        # A retry re-runs the calls that failed (others replay).
        self.rerun_failed = False
        # For the metrics: the function tools the agent's code registered (the labels a call
        # may have; an MCP server's tools are `other`) and when the step being run began.
        self.tool_names: frozenset[str] = frozenset()
        self.step_began = time.monotonic()
        # A replay of a saved case: its decisions and the tool oracle (agent.sdk_run.replay).
        self.replay = SdkReplay.of(task)
        # The history as JSON, each message dumped once (what the checkpoints store).
        self.messages_dumped = MessagesDumped()

    @property
    def sdk(self) -> dict[str, Any]:
        return self.state.sdk  # type: ignore[return-value]

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
            checkpoint = self.checkpoint_stage(trigger)
            update["head_checkpoint_id"] = checkpoint.id
        try:
            with transaction.atomic() if then is not None else nullcontext():
                self.cancel_seen = services.task_fenced_write(
                    task_id=self.task_id,
                    epoch=self.epoch,
                    inserts=[*([checkpoint] if checkpoint else []), *inserts, *self.pending_events],
                    inserts_if_absent=[*self.blobs.values(), *version_bodies_unwritten(self)],
                    updates=list(updates),
                    **update,
                )
                self.pending_events = []
                if then is not None:
                    then(checkpoint)
        except BaseException:
            self.written(False)
            raise
        self.written(True)
        version_bodies_written(self)
        return checkpoint

    def write_then(self, then: Callable[[], Any]) -> None:
        self.commit(then=lambda _checkpoint: then())

    def call_id(self, tool_call_id: str) -> str:
        return f"{self.sdk['gen']}.{self.state.step_index}.{tool_call_id}"[:100]
