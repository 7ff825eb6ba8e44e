"""The state one run of a task holds (`Run`), built from its parts, from the bottom:
RunBookkeeping (run_books: events, clocks, usage, tools), RunWrites (run_writes: checkpoints
staged, the durable commit) and RunPauses (run_pauses: pause, retry through the scheduler).
The job's lease (`with_lease`: lease) and the exceptions that end a run (StopRun, Paused:
ends) are re-exported here for the units and the other runners."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from agent.context import context_policy
from agent.llm import model_for_spec
from agent.llm.replay import ReplayModel
from agent.runtime.ends import Paused, StopRun
from agent.runtime.lease import (
    connection_lost,
    job_timed_out,
    with_lease,
    with_lease_loaded,
    worker_identity,
)
from agent.runtime.live import LiveOutput
from agent.runtime.oracle import ToolOracle
from agent.runtime.run_pauses import RunPauses
from agent.runtime.session_clock import SessionClock
from agent.runtime.watchdog import Watchdog
from agent.tools.mcp_client import McpConnections
from agent.validation import check_limits
from cases.selectors import replay_setup
from checkpoints.models import Blob, Checkpoint
from checkpoints.payload import CheckpointCodec
from checkpoints.services import checkpoint_next_seq
from harness_base.config import harness_config
from multiagent.shared import shared_dir
from review.selectors import plan_for_execution
from tasks.agent_state import AgentState
from tasks.models import Task, TaskEvent, ToolCall, ToolOutput
from tasks.spec import TaskSpec
from tasks.tools.registry import ToolSpec

__all__ = [
    "OBSERVATION_MAX_CHARS",
    "Paused",
    "Run",
    "SessionClock",
    "StopRun",
    "connection_lost",
    "job_timed_out",
    "with_lease",
    "with_lease_loaded",
    "worker_identity",
]

OBSERVATION_MAX_CHARS = 4000


class Run(RunPauses):
    """One run of a task by one worker, from acquisition to the end of the job: the task, the
    lease epoch, the agent state and what is not written yet (events, read-only calls)."""

    # Set at pick-up (agent.runtime.drift_check): the head's versions and the calls pending
    # since before, each checked once just before it runs.
    drift_base: dict[str, Any]
    drift_calls: set[str]

    def __init__(self, task: Task, worker_id: str) -> None:
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
        self.model = model_for_spec(self.spec.model)
        # A replay of a saved case: its tools answer from the recording (agent.runtime.replaying)
        # and, unless a candidate model was named, so does its model.
        setup = replay_setup(task_id=task.id) if task.is_replay else None
        self.oracle = ToolOracle.of(setup) if setup is not None else None
        if setup is not None and setup.decisions is not None:
            self.model = ReplayModel.of_turns(setup.decisions, source=f"case {setup.case_name}")
        self.context = context_policy(config=self.config.context, override=self.spec.context)
        self.limits = check_limits(config=self.config.validation, checks=self.spec.checks)
        # A plan task (agent.runtime.plan): its dry run (also once its plan is rejected: the
        # run then ends canceled) works on a copy of the workspace; its execution run is held
        # to the decided plan.
        self.planning = task.plan_phase in ("planning", "rejected")
        self.plan = plan_for_execution(task_id=task.id) if task.plan_phase == "executing" else None
        self.workspace = task.plan_workspace_path if self.planning else task.workspace_path
        # The group's shared directory (multiagent/shared.py), if its root asked for one.
        self.shared = shared_dir(task)
        self.pending_events: list[TaskEvent] = []
        self.deferred_rows: list[ToolCall] = []
        # What calls produced for people (tasks.outputs), written with their outcomes.
        self.pending_outputs: list[ToolOutput] = []
        # The last captured workspace manifest; None once a tool may have changed the files.
        self.snapshot: dict | None = None
        # Workspace files changed (as tools reported) since `snapshot` was captured.
        self.changed: set[str] = set()
        self.cancel_seen = task.cancel_requested
        # call_id -> ledger row; see agent.runtime.ledger.
        self.ledger: dict[str, ToolCall] = {}
        self.state = AgentState()
        # The checkpoint a resumed run started from (agent.runtime.start).
        self.resumed_from: Any = None
        self.head_id: Any = task.head_checkpoint_id
        # The head as the task row has it; checkpoints built but not written yet (`stage`).
        self.written_head: Any = task.head_checkpoint_id
        self.staged: list[Checkpoint] = []
        # New blobs of the staged checkpoints' snapshots and payload bases, inserted with them
        # (see `commit`).
        self.blobs: dict[str, Blob] = {}
        # Compresses this run's checkpoints against a recent one (checkpoints.services).
        self.codec = CheckpointCodec()
        # Not written yet: a model turn, a side effect's outcome (both written before the next
        # tool runs, else at the step's end).
        self.turn_unwritten = False
        self.effect_unwritten = False
        self.seq = checkpoint_next_seq(task_id=task.id)
        self.run_started = time.monotonic()
        # When the step under way began (or the run, for its first): the step's duration.
        self.step_started = self.run_started
        self.seconds_before = task.seconds_used
        # The session clock: wall time since the task first started, less the time it waited
        # for a human (Task.human_wait_s: review and held time, kept by task_transition).
        self.session = SessionClock(task)
        self.human_wait_s = task.human_wait_s
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )
        # MCP sessions of this run (opened on first use, closed when the job ends) and the
        # task's MCP tools by name, as recorded in its first checkpoint.
        self.mcp = McpConnections(task_id=task.id, workspace=self.workspace)
        self.mcp_specs: dict[str, ToolSpec] = {}
        # The running call's output for the task page, while it runs (agent.runtime.live).
        self.live = LiveOutput(task_id=task.id)
