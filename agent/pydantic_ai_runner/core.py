"""The base of PydanticAIRun (RunCore, on agent.sdk_run's SdkRun: the lease, clocks, agent
state, events, usage, the checks between nodes, the stop ladder): its one way to write
(`commit`: fenced, optionally a checkpoint; `write_then`), what rides with the next write
(`stage`: a checkpoint built now; `deferred_rows`: calls' outcomes) and a call's ledger id
(`call_id`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from django.db import transaction

from agent.pydantic_ai_runner.agents import AgentNotRegistered, agent_load
from agent.pydantic_ai_runner.messages import MessagesDumped
from agent.runtime.run_writes import LEDGER_FIELDS
from agent.sdk_run import SdkRun
from agent.sdk_run.replay import SdkReplay
from agent.versions import version_bodies_unwritten, version_bodies_written
from checkpoints.models import Checkpoint
from checkpoints.snapshots import snapshot_distrust
from tasks import services
from tasks.models import Task, ToolCall


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
        # The last model turn's time (agent.pydantic_ai_runner.drive), for its model_decision.
        self.turn_ms = 0.0
        # A replay of a saved case: its decisions and the tool oracle (agent.sdk_run.replay).
        self.replay = SdkReplay.of(task)
        # The history as JSON, each message dumped once (what the checkpoints store).
        self.messages_dumped = MessagesDumped()
        # What the next write carries besides its own: checkpoints built earlier (a model
        # turn's, with its hosted calls' rows) and the outcomes of calls that ran (`commit`).
        self.staged: list[Any] = []
        self.deferred_rows: list[ToolCall] = []
        self.written_head = self.head_id
        # The calls of the tools node that were started and have not settled yet.
        self.calls_running = 0

    @property
    def sdk(self) -> dict[str, Any]:
        sdk = self.state.sdk
        assert sdk is not None  # the runner's part of the state, set when the task started
        return sdk

    def stage(
        self, trigger: str, *, inserts: Sequence[Any] = (), rescan: bool = True
    ) -> Checkpoint:
        """The checkpoint of `trigger`, built now (the state as it is), written by the next
        commit with `inserts`: a model turn's rides with the intent of its first call, before
        the tool runs. `rescan` False: no tool ran since the last checkpoint."""
        checkpoint = self.checkpoint_stage(trigger, defer=self.blobs, rescan=rescan)
        self.staged += [checkpoint, *inserts]
        return checkpoint

    def commit(
        self,
        *,
        trigger: str | None = None,
        inserts: Sequence[Any] = (),
        updates: Sequence[tuple[Any, list[str]]] = (),
        then: Callable[[Any], None] | None = None,
        fields: dict[str, Any] | None = None,
        behind: bool = False,
    ) -> Any:
        """One fenced write: lease proof + heartbeat + usage + events + what was staged and
        deferred since the last write (+ rows) [+ the checkpoint of `trigger`: the state with
        the message history and a workspace snapshot, made head]; `then(checkpoint)` runs
        last in the same transaction. `behind`: sent without waiting for its commit, collected
        before the next write (a step's outcome: agent.sdk_run.write_behind). A write in
        flight is collected first."""
        self.collect()
        checkpoint = self.stage(trigger) if trigger is not None else None
        update = {**self.usage(), **(fields or {})}
        if self.head_id != self.written_head:
            update["head_checkpoint_id"] = self.head_id
        named = {id(row) for row, _fields in updates}
        deferred = [(row, LEDGER_FIELDS) for row in self.deferred_rows if id(row) not in named]
        write = {
            "task_id": self.task_id,
            "epoch": self.epoch,
            "inserts": [*self.staged, *inserts, *self.pending_events],
            "inserts_if_absent": [*self.blobs.values(), *version_bodies_unwritten(self)],
            "updates": [*deferred, *updates],
            **update,
        }
        if behind and then is None:
            self.write_behind(failed=self.undo_behind(), **write)
            self.pending_events = []
        else:
            try:
                with transaction.atomic() if then is not None else nullcontext():
                    self.cancel_seen = services.task_fenced_write(**write)
                    self.pending_events = []
                    if then is not None:
                        then(checkpoint)
            except BaseException:
                if self.blobs:
                    snapshot_distrust(self.workspace)
                self.written(False)
                raise
        self.staged = []
        self.deferred_rows = []
        self.written_head = self.head_id
        self.written(True)
        version_bodies_written(self)
        return checkpoint

    def undo_behind(self) -> Callable[[], None]:
        """What a write sent behind (from what is pending now) undoes if it does not commit:
        its events and rows pending again, its checkpoints (and those built on them since)
        dropped, the head back to the last written one, the workspace scanned anew."""
        events, rows, staged = self.pending_events, self.deferred_rows, self.staged
        head, had_blobs = self.written_head, bool(self.blobs)
        bodies = getattr(self, "_version_bodies", None)

        def failed() -> None:
            if had_blobs:
                snapshot_distrust(self.workspace)
            self.written(False)
            self.pending_events = [*events, *self.pending_events]
            self.deferred_rows = [*rows, *self.deferred_rows]
            kept = [row for row in [*staged, *self.staged] if not isinstance(row, Checkpoint)]
            self.staged = kept
            self.head_id = self.written_head = head
            self._version_bodies = bodies

        return failed

    def write_then(self, then: Callable[[], Any]) -> None:
        self.commit(then=lambda _checkpoint: then())

    def call_id(self, tool_call_id: str) -> str:
        return f"{self.sdk['gen']}.{self.state.step_index}.{tool_call_id}"[:100]
