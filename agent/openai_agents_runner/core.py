"""RunCore, the base of AgentsRun on agent.sdk_run's SdkRun (the lease, clocks, events, usage,
the checks at every boundary, the stop ladder): the SDK's tools and MCP servers, call ids,
the checkpoint and the fenced write (commit, write_then)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agents import Agent, FunctionTool
from django.db import transaction

from agent.openai_agents_runner.loading import AgentNotRegistered, agent_load
from agent.runtime.run_writes import LEDGER_FIELDS
from agent.sdk_run import SdkRun
from agent.sdk_run.replay import SdkReplay
from agent.versions import version_bodies_unwritten, version_bodies_written
from checkpoints.snapshots import snapshot_distrust
from tasks import services
from tasks.models import Task, ToolCall


class RunCore(SdkRun):
    """AgentsRun's state and bookkeeping: what every other part writes through."""

    NOT_REGISTERED = (AgentNotRegistered, ImportError, AttributeError)
    load_code = staticmethod(agent_load)
    # The SDK's RunState (its dict): its lists of items and responses and its dicts by call id
    # stored as chunks.
    HISTORY_JSON = ("run_state",)
    # The bodies of its versions not stored yet (agent.versions sets and clears it).
    _version_bodies: dict[str, Any] | None

    def __init__(self, task: Task, worker_id: str, *, loaded: Agent | None = None) -> None:
        super().__init__(task, worker_id, loaded=loaded)
        # Function tools running now (the SDK may run several at once): the last to end ends
        # the promise made to the worker for them.
        self.tools_running = 0
        self.written_head: Any = task.head_checkpoint_id
        self.pending_rows: dict[str, ToolCall] = {}
        # SDK call id -> whether the tool itself asked for approval (its own needs_approval).
        self.sdk_asked: dict[str, bool] = {}
        self.tools_of: dict[str, FunctionTool] = {}
        # The agents' MCP servers (the run's sandboxed copies, connected for the run: by the
        # operator's object's id), a stdio copy's name and start, and their tools' risk by name.
        self.mcp_servers: list[Any] = []
        self.mcp_copies: dict[int, Any] = {}
        self.mcp_started: dict[int, tuple[str, Any]] = {}
        self.mcp_started_by_name: dict[str, Any] = {}
        self.mcp_risk: dict[str, str] = {}
        # For the metrics: the function tools the agents' code registered (the labels a call
        # may have; an MCP server's tools are `other`) and when the step being run began.
        self.tool_names: set[str] = set()
        self.step_began: float | None = None
        # When the model call in flight began (its model_decision's duration_ms).
        self.turn_began: float | None = None
        self.run_model: Any = None
        # The agent the SDK is about to ask the model for (the hosted tools' gate names it);
        # whether any agent of the graph has hosted tools (its model is then gated).
        self.turn_agent = ""
        self.has_hosted = False
        # A replay of a saved case (agent.sdk_run.replay; replay): the recorded call each new
        # call was matched with, by ledger id.
        self.replay = SdkReplay.of(task)
        self.replay_recorded: dict[str, dict[str, Any]] = {}
        # The gate decides in the SDK's loop (one Runner.run for the job; ApprovalGate's
        # gate_inline), the model's turns recorded (turns.RecordedTurns): set by the run.
        self.inline = False
        # Recorded turns: those left to answer the model with, whether the last one is in a
        # checkpoint yet, the SDK call ids they hold, and the branch of the calls that ran
        # before the head was written (a rollback runs only the later ones again).
        self.turns_replay: list[Any] = []
        self.turns_unwritten = False
        self.recorded_calls: set[str] = set()
        self.call_branches: dict[str, int] = {}

    def alignments(self) -> list[dict[str, Any]]:
        """The alignments after recoveries (RunStart): {text, at: the input item it goes
        before; None until the first request after the recovery puts it at the end}."""
        return list((self.state.sdk or {}).get("alignments") or [])

    def call_id(self, sdk_call_id: str) -> str:
        branch = self.call_branches.get(sdk_call_id, self.sdk_branch())
        return f"oa{branch}:{sdk_call_id}"[:100]

    def sdk_branch(self) -> int:
        """The branch the call ids belong to: moved on by a rollback only (a retry or forward
        keeps the calls' ids, so what succeeded replays from the ledger)."""
        return int((self.state.sdk or {}).get("branch", 0))

    def commit(
        self,
        *,
        checkpoint: tuple[str, str] | None = None,
        rows: Sequence[ToolCall] = (),
        fields: dict[str, Any] | None = None,
        starting: ToolCall | None = None,
        behind: bool = False,
    ) -> None:
        """One fenced write: lease proof + heartbeat + usage + [a checkpoint with its new blobs]
        + the ledger rows changed since the last write + the events. A model turn recorded
        since the last checkpoint goes into one (`after_model`) with the first write after it:
        the turn is durable before any call it made runs (turns.RecordedTurns). `starting`: a
        call's row marked running after the checkpoint is taken (a rollback to it undoes the
        call: checkpoints.selectors.calls_undone). `behind`: sent without waiting for its
        commit, collected before the next write (a call's outcome:
        agent.sdk_run.write_behind). A write in flight is collected first."""
        self.collect()
        if checkpoint is None and self.turns_unwritten and not behind:
            checkpoint = ("after_model", "step")
        staged = (
            [self.checkpoint_stage(checkpoint[0], level=checkpoint[1], defer=self.blobs)]
            if checkpoint
            else []
        )
        if starting is not None:
            self.call_started(starting)
            rows = [*rows, starting]
        update = {**self.usage(), **(fields or {})}
        if self.head_id != self.written_head:
            update["head_checkpoint_id"] = self.head_id
        changed = {row.call_id: row for row in [*self.pending_rows.values(), *rows]}
        write = {
            "task_id": self.task_id,
            "epoch": self.epoch,
            "inserts_if_absent": [*self.blobs.values(), *version_bodies_unwritten(self)],
            "inserts": [
                *staged,
                *(r for r in changed.values() if r._state.adding),
                *self.pending_events,
            ],
            "updates": [(r, LEDGER_FIELDS) for r in changed.values() if not r._state.adding],
            **update,
        }
        if behind:
            self.write_behind(failed=_undo_behind(self, changed), **write)
        else:
            try:
                self.cancel_seen = services.task_fenced_write(**write)
            except BaseException:
                if self.blobs:
                    snapshot_distrust(self.workspace)
                self.written(False)
                raise
        for row in changed.values():
            row._state.adding = False
        version_bodies_written(self)
        if checkpoint:
            self.turns_unwritten = False
        self.written(True)
        self.pending_events = []
        self.pending_rows = {}
        self.written_head = self.head_id

    def write_then(self, then: Callable[[], Any]) -> None:
        with transaction.atomic():
            self.commit()
            then()


def _undo_behind(run: RunCore, changed: dict[str, ToolCall]) -> Callable[[], None]:
    """What a write sent behind undoes if it does not commit: its events and rows pending
    again (a new row inserted again), the head back to the last written one, the workspace
    scanned anew. It carries no checkpoint (RunCore.commit's `behind` takes none)."""
    events, head, had_blobs = run.pending_events, run.written_head, bool(run.blobs)
    adding = [row for row in changed.values() if row._state.adding]
    bodies = getattr(run, "_version_bodies", None)

    def failed() -> None:
        if had_blobs:
            snapshot_distrust(run.workspace)
        run.written(False)
        for row in adding:
            row._state.adding = True
        run.pending_events = [*events, *run.pending_events]
        run.pending_rows = {**changed, **run.pending_rows}
        run.head_id = run.written_head = head
        run._version_bodies = bodies

    return failed
