"""The state one run of a task holds (`Run`) and the writes every unit shares: an event, one
durable commit, a pause that ends the job, a retry through the scheduler. Also the job's
lease (`with_lease`) and the exceptions that end a run."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import timedelta
from decimal import Decimal
from typing import Any, NoReturn

from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connection,
    connections,
    transaction,
)
from django.utils import timezone

from agent.context import context_policy
from agent.llm import ModelDecision, model_for_spec
from agent.llm.replay import ReplayModel
from agent.runtime.live import LiveOutput
from agent.runtime.oracle import ToolOracle
from agent.runtime.watchdog import Watchdog
from agent.tools.mcp_client import McpConnections
from agent.validation import check_limits
from cases.selectors import replay_setup
from checkpoints.blobstore import blob_store_deferred
from checkpoints.models import Blob, Checkpoint
from checkpoints.services import CheckpointCodec, checkpoint_build, checkpoint_next_seq
from checkpoints.snapshots import DEFER_BLOB_BYTES, snapshot_capture, snapshot_distrust
from harness_base import telemetry
from harness_base.config import harness_config
from harness_base.metrics import CHECKPOINT_WRITE_SECONDS, metric_observe
from multiagent.shared import shared_dir
from tasks import beacon, services
from tasks.agent_state import AgentState, ErrorInfo
from tasks.events import EventType
from tasks.models import Task, TaskEvent, ToolCall, ToolOutput
from tasks.spec import MAX_TURN_TOKENS, TaskSpec
from tasks.states import TaskStatus
from tasks.tools.registry import ToolContext, ToolSpec, registry
from tasks.tracing import checkpoints_traced, task_segment

log = logging.getLogger(__name__)

OBSERVATION_MAX_CHARS = 4000
# Task.cost_usd is a decimal(12, 6): the running cost stops just below what it holds.
MAX_COST_USD = 999_999.0


class StopRun(Exception):
    """Ends the run with a terminal outcome."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message


class Paused(Exception):
    """The task moved to waiting_review (or retry_wait); the job ends."""


class SessionClock:
    """How long a task's session has run, on the database's clock, as leases are: its age when
    this worker took the lease (`started_at` and the acquisition's `heartbeat_at`, both the
    database's time), then this host's monotonic clock. The wall clock of the worker's machine,
    which may be hours off or stepped mid-run, plays no part."""

    def __init__(self, task: Task) -> None:
        started, acquired = task.started_at, task.heartbeat_at
        self.at_acquisition_s = (
            max(0.0, (acquired - started).total_seconds()) if started and acquired else 0.0
        )
        self.acquired_mono = time.monotonic()

    def elapsed_s(self) -> float:
        return self.at_acquisition_s + time.monotonic() - self.acquired_mono


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def with_lease_loaded(
    *, task_id: Any, load: Callable[[str], Any], name_key: str, run: Callable[[Task, str, Any], str]
) -> str:
    """with_lease for a task whose spec names operator-registered code (a graph, an SDK agent):
    the code is imported before the task is taken, since an import can take seconds, which must
    not count against the heartbeat. A load that fails here is retried by `run`, which fails
    the task naming the reason."""
    worker_id = worker_identity()
    spec = Task.objects.filter(id=task_id).values_list("spec", flat=True).first() or {}
    try:
        loaded = load(spec["agent"][name_key])
    except Exception:
        loaded = None
    return with_lease(
        task_id=task_id, worker_id=worker_id, execute=lambda task: run(task, worker_id, loaded)
    )


def with_lease(*, task_id: Any, worker_id: str, execute: Callable[[Task], str]) -> str:
    """Take the task's lease (a queued task, or one whose retry backoff has elapsed) and run
    `execute(task)`. A duplicate job exits untouched; with no free capacity the task is put
    back on its queue after a short delay. A run whose database connection broke waits for
    the database and gives the task back (`connection_lost_release`)."""
    try:
        task = _acquire(task_id=task_id, worker_id=worker_id)
    except services.CapacityFull:
        services.task_defer(task_id=task_id)
        return "deferred"
    if task is None:
        log.info("task %s is not queued; nothing to do", task_id)
        return "skipped"
    with task_segment(task) as span:
        try:
            outcome = execute(task)
        except Exception as exc:
            if not connection_lost(exc):
                raise
            outcome = connection_lost_release(task_id=task_id, epoch=task.lease_epoch, exc=exc)
        telemetry.set_attributes(span, {"harness.run.outcome": outcome})
        log.info("task %s: run ended: %s", task_id, outcome)
        return outcome


def _acquire(*, task_id: Any, worker_id: str) -> Task | None:
    for attempt in range(2):
        try:
            task = services.task_acquire(task_id=task_id, worker_id=worker_id)
            if task is None and services.task_wake(task_id=task_id):
                task = services.task_acquire(task_id=task_id, worker_id=worker_id)
            return task
        except (OperationalError, InterfaceError) as exc:
            # The job's first query met a connection the database dropped (it restarted since
            # the worker last used it): once it answers again, take the task as usual.
            if attempt or not connection_lost(exc) or not database_wait():
                raise
    return None


def connection_lost(exc: BaseException) -> bool:
    """The run's database connection broke (the server restarted or failed over, the network
    dropped it), as opposed to a statement the database refused."""
    if isinstance(exc, InterfaceError):
        return True
    return isinstance(exc, OperationalError) and not connection.is_usable()


def database_wait() -> bool:
    """Wait up to HARNESS_DB_RECONNECT_S for the database to answer on a new connection,
    promising the worker (tasks.beacon) to be heard from meanwhile. -> it answers."""
    deadline = time.monotonic() + settings.HARNESS_DB_RECONNECT_S
    delay = 0.1
    while True:
        connections.close_all()
        beacon.expect("database", max(0.0, deadline - time.monotonic()) + delay)
        try:
            connection.ensure_connection()
            if connection.is_usable():
                return True
        except DatabaseError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(2 * delay, 2.0)


def connection_lost_release(*, task_id: Any, epoch: int, exc: BaseException) -> str:
    """The run lost its database connection: nothing it did since its last durable write
    counts (a call whose intent was recorded is settled by the next run like any call a worker
    died in). Once the database answers, the task is queued again under this lease and carried
    on from its newest checkpoint; if it does not answer in time, the task stays `running` and
    the sweep redispatches it once its heartbeat is stale."""
    error = f"{type(exc).__name__}: {exc}"[:500]
    log.warning("task %s: database connection lost (%s); waiting for the database", task_id, error)
    if not database_wait():
        log.error("task %s: the database did not come back; left to the sweep", task_id)
        return "connection_lost"
    released = services.task_release_lost_connection(task_id=task_id, epoch=epoch, error=error)
    return "released" if released else "lease_lost"


_LEDGER_FIELDS = [
    "arguments",
    "arguments_hash",
    "status",
    "result",
    "error_class",
    "error_message",
    "attempts",
    "attempt_log",
    "started_at",
    "finished_at",
    "duration_ms",
]


class Run:
    """One run of a task by one worker, from acquisition to the end of the job: the task, the
    lease epoch, the agent state and what is not written yet (events, read-only calls)."""

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
        self.workspace = task.workspace_path
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

    # -- bookkeeping ---------------------------------------------------------------------

    def event(self, type: str, payload: dict | None = None) -> None:
        self.pending_events.append(
            services.event_build(
                task_id=self.task_id,
                type=type,
                payload=payload,
                step_index=self.state.step_index,
            )
        )

    def timeout_event(self, *, layer: str, limit_s: float, **payload: Any) -> None:
        self.event(EventType.TIMEOUT, {"layer": layer, "limit_s": limit_s, **payload})

    def elapsed(self) -> float:
        return self.seconds_before + (time.monotonic() - self.run_started)

    def session_elapsed(self) -> float:
        return self.session.elapsed_s() - self.human_wait_s

    def usage_fields(self) -> dict[str, Any]:
        return {
            "current_step": self.state.step_index,
            "steps_used": self.state.budget.steps,
            "tokens_used": self.state.budget.tokens,
            "cost_usd": Decimal(f"{self.state.budget.cost_usd:.6f}"),
            "seconds_used": self.elapsed(),
        }

    def charge(self, usage: ModelDecision) -> dict[str, Any]:
        """Count a model call's tokens and cost against the task; the event fields for it.
        An adapter's counts are input too (a server can report anything): each is clamped to
        MAX_TURN_TOKENS and the running cost to what the task row holds."""
        model = usage.model or self.model.name
        prompt = min(max(usage.prompt_tokens, 0), MAX_TURN_TOKENS)
        completion = min(max(usage.completion_tokens, 0), MAX_TURN_TOKENS)
        cost = self.config.cost_usd(model=model, prompt_tokens=prompt, completion_tokens=completion)
        self.state.budget.tokens += min(prompt + completion, MAX_TURN_TOKENS)
        self.state.budget.cost_usd = min(self.state.budget.cost_usd + cost, MAX_COST_USD)
        return {
            "model": model,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "cost_usd": round(cost, 8),
        }

    def note_check_failure(self, what: str) -> None:
        self.state.checks.failures_this_step += 1
        self.state.checks.last_failure = what[:500]

    def note_mcp_errors(self) -> None:
        """Connection errors of this run's MCP servers, for the timeline and /ops/."""
        for server, message in self.mcp.errors.items():
            self.event(EventType.MCP_SERVER_ERROR, {"server": server, "message": message})
        self.mcp.errors.clear()

    # -- tools ---------------------------------------------------------------------------

    def tool_names(self) -> list[str]:
        """The tools this task may call: the spec's, with `<server>__*` expanded."""
        names = [n for n in self.spec.tools if not n.endswith("__*")]
        return names + [n for n in self.mcp_specs if n not in names]

    def tool(self, name: str) -> ToolSpec:
        spec = self.mcp_specs.get(name)
        return spec if spec is not None else registry.get(name)

    def tool_context(self, row: ToolCall) -> ToolContext:
        # Each call has its own stop event: a timed-out, abandoned call keeps seeing it set.
        return ToolContext(
            task_id=str(self.task_id),
            call_id=row.call_id,
            workspace=self.workspace,
            timeout_s=self.tool_s,
            shared=self.shared,
        )

    # -- durable writes ------------------------------------------------------------------

    def capture_snapshot(self) -> dict | None:
        """The workspace manifest stored with a checkpoint (see checkpoints.snapshots). Only
        tool calls change the workspace during a run, so a checkpoint with no call since the
        last capture (after a model turn) reuses that manifest instead of rescanning; after
        calls of tools that report their changes, only the changed files' folders are
        scanned; after any other tool (commands, user tools), the whole workspace."""
        if self.snapshot is None or self.changed:
            self.snapshot = snapshot_capture(
                task_id=self.task_id,
                workspace=self.workspace,
                changed=self.changed if self.snapshot is not None else None,
                defer=self.blobs,
            )
            self.changed = set()
        return self.snapshot

    def stage(self, *, trigger: str | None, level: str | None = None) -> Checkpoint | None:
        """Build the checkpoint of `trigger` now (the state as it is) and keep it for the next
        durable write, which inserts it (and makes it the head) with whatever else that write
        carries. `trigger` None, or a trigger switched off in harness.yaml, builds none; a
        `level` builds one at that level whatever harness.yaml says."""
        configured = self.config.trigger(trigger) if trigger else None
        if configured is None and not (trigger and level):
            return None
        checkpoint = checkpoint_build(
            task_id=self.task_id,
            seq=self.seq,
            state=self.state,
            level=level or configured.level,
            trigger=trigger,
            snapshot=self.capture_snapshot(),
            parent_id=self.head_id,
            codec=self.codec,
        )
        bases = self.codec.take_bases()
        if bases:
            blob_store_deferred(self.blobs, DEFER_BLOB_BYTES).put_absent(bases)
        self.staged.append(checkpoint)
        self.seq += 1
        self.head_id = checkpoint.id
        return checkpoint

    def commit(
        self,
        *,
        trigger: str | None,
        extra: list[Any] | None = None,
        fields: dict[str, Any] | None = None,
        then: Callable[[Any], None] | None = None,
        level: str | None = None,
    ) -> None:
        """One durable write: what was staged since the last one (checkpoints with the new
        blobs of their snapshots, events, the outcomes of calls) + [the checkpoint of
        `trigger`, see `stage`] + task row (fenced) + extra rows, in one transaction;
        `then(the checkpoint of trigger or None)` runs last inside it."""
        checkpoint = self.stage(trigger=trigger, level=level)
        update = {**self.usage_fields(), **(fields or {})}
        if self.head_id != self.written_head:
            update["head_checkpoint_id"] = self.head_id
        # Outcomes of read-only calls ride along with the next write (see agent.runtime.calls).
        extra = [
            *self.deferred_rows,
            *(row for row in extra or () if row not in self.deferred_rows),
        ]
        started = time.monotonic()
        try:
            # A pause adds `then` (a transition, a review) to the same write: one transaction.
            with transaction.atomic() if then is not None else nullcontext():
                self.cancel_seen = services.task_fenced_write(
                    task_id=self.task_id,
                    epoch=self.epoch,
                    inserts_if_absent=list(self.blobs.values()),
                    inserts=[
                        *self.staged,
                        *(row for row in extra if row._state.adding),
                        *self.pending_events,
                        *self.pending_outputs,
                    ],
                    updates=[(row, _LEDGER_FIELDS) for row in extra if not row._state.adding],
                    **update,
                )
                if then is not None:
                    then(checkpoint)
        except BaseException:
            if self.blobs:
                snapshot_distrust(self.workspace)
            # The bases of the staged checkpoints may not be stored: the next one starts anew.
            self.codec.forget()
            raise
        checkpoints_traced(self.staged)
        metric_observe(CHECKPOINT_WRITE_SECONDS, time.monotonic() - started)
        self.blobs = {}
        self.deferred_rows = []
        self.pending_events = []
        self.pending_outputs = []
        self.staged = []
        self.written_head = self.head_id
        self.turn_unwritten = self.effect_unwritten = False

    def pause(
        self,
        *,
        to: str,
        trigger: str | None,
        reason: str,
        extra: list[Any] | None = None,
        fields: dict[str, Any] | None = None,
        then: Callable[[Any], None] | None = None,
    ) -> NoReturn:
        """End the job leaving the task in `to` (waiting_review, waiting_children or
        retry_wait): checkpoint, rows, events, `then(checkpoint)` and the transition commit
        together."""

        def transition(checkpoint: Any) -> None:
            if then is not None:
                then(checkpoint)
            services.task_transition(
                task_id=self.task_id,
                to=to,
                expect_epoch=self.epoch,
                reason=reason,
                fields={"worker_id": "", **(fields or {})},
            )

        self.commit(trigger=trigger, extra=extra, then=transition)
        raise Paused()

    def schedule_retry(
        self, *, attempt: int, delay_s: float, error: ErrorInfo, extra: list[Any] | None = None
    ) -> NoReturn:
        """Back off through RQ's scheduler, never by sleeping: the task waits in retry_wait
        and the job ends; the scheduled job wakes it and resumes from the checkpoint."""
        retry_at = timezone.now() + timedelta(seconds=delay_s)
        self.state.last_error = error
        log.info(
            "task %s: %s error, retry %d in %.1fs",
            self.task_id,
            error.error_class,
            attempt,
            delay_s,
        )
        self.event(
            EventType.RETRY_SCHEDULED,
            {
                # A model retry has no call: no `"call_id": null` (the pages read it as a call).
                **({"call_id": error.call_id} if error.call_id else {}),
                "attempt": attempt,
                "error_class": error.error_class,
                "message": error.message[:500],
                "delay_s": round(delay_s, 3),
                "retry_at": retry_at.isoformat(),
            },
        )
        self.pause(
            to=TaskStatus.RETRY_WAIT,
            trigger="on_retryable_error",
            reason=f"retry in {delay_s:.1f}s after {error.error_class} error",
            extra=extra,
            fields={"retry_at": retry_at, "retry_count": self.task.retry_count + 1},
            then=lambda _checkpoint: services.task_enqueue(task=self.task, delay_s=delay_s),
        )
