"""The agent loop, run inside an RQ job (`agent.jobs.run_task`).

    acquire (lease epoch) -> load head checkpoint (verified) or start -> loop:
        boundary checks (cancel, budgets, session timeout)
        model turn -> checkpoint `after_model`
        for each proposed call: validate -> policy (allow / review / deny)
            -> checkpoint before side effects -> execute (call_id = idempotency key, timeout)
            -> observation
        checkpoint `after_step`

Every write is fenced by the lease epoch (`tasks.services.task_fenced_write`): a worker presumed
dead and replaced fails its next write and stops before running another side effect. A review,
a retry wait, success, failure or cancel ends the job; no worker waits for a human.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, NoReturn

from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models.functions import Now
from django.utils import timezone
from pydantic import ValidationError

from agent.context import HARNESS_AUTHOR, context_apply, context_policy, goal_facts
from agent.llm import ModelDecision, ModelError, model_for_spec
from agent.retry import (
    TIMEOUT,
    TRANSIENT,
    UNKNOWN_OUTCOME,
    classify_exception,
    is_retryable,
    retry_policy,
)
from agent.tools.mcp_client import McpConnections, McpUnavailable, mcp_tools_discover
from agent.validation import (
    CHECK_ERROR_CLASSES,
    CheckFailure,
    check_call,
    check_final,
    check_limits,
    check_result,
)
from checkpoints.alignment import context_align
from checkpoints.services import (
    NoValidCheckpoint,
    checkpoint_build,
    checkpoint_load_latest_valid,
    checkpoint_next_seq,
)
from checkpoints.snapshots import snapshot_capture, snapshot_materialise_if_missing
from harness_site.config import harness_config
from multiagent import coordinator, delegation
from multiagent.shared import shared_dir
from review import policy
from review.models import ReviewStatus
from review.policy import PolicyDecision
from review.services import review_request_open
from tasks import services
from tasks.agent_state import AgentState, ErrorInfo, Message, ProposedCall
from tasks.canonical import canonical_hash, nul_free
from tasks.events import EventType
from tasks.feedback import compact_feedback
from tasks.models import Task, TaskEvent, ToolCall, ToolCallStatus
from tasks.paths import file_write
from tasks.spec import DELEGATE_TOOL, MAX_TURN_TOKENS, TaskSpec
from tasks.states import LeaseLost, TaskStatus
from tasks.tools.mcp import mcp_servers_named, mcp_tool_spec
from tasks.tools.registry import ToolContext, ToolError, ToolSpec, UnknownTool, registry

log = logging.getLogger(__name__)

OBSERVATION_MAX_CHARS = 4000
# After a tool's timeout its stop event is set; it gets this long to stop (run_command kills its
# process group: SIGTERM, then SIGKILL after 2 s) before the call is abandoned.
TOOL_STOP_GRACE_S = 3.0
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


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for item in exc.errors()[:3]:
        loc = ".".join(str(p) for p in item["loc"]) or "arguments"
        parts.append(f"{loc}: {item['msg']}")
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _schema_hint(tool: ToolSpec) -> str:
    schema = tool.json_schema()
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = [
        f"{name}{'' if name in required else '?'}: {p.get('type', 'any')}"
        for name, p in props.items()
    ]
    return "{" + ", ".join(fields) + "}"


def _observation(result: Any) -> str:
    text = (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )
    if len(text) > OBSERVATION_MAX_CHARS:
        cut = len(text) - OBSERVATION_MAX_CHARS
        text = text[:OBSERVATION_MAX_CHARS] + f"… [truncated {cut} chars]"
    return text


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


class InThread:
    """Runs `func()` in a daemon thread so the caller can stop waiting at a deadline. A call
    that overruns is abandoned: its late result or error is never read. The thread closes its
    own database connections (Django's are per thread)."""

    def __init__(self, func: Callable[[], Any], *, name: str) -> None:
        self.value: Any = None
        self.error: BaseException | None = None

        def target() -> None:
            try:
                self.value = func()
            except BaseException as exc:  # handed back to the loop thread
                self.error = exc
            finally:
                connections.close_all()

        self.thread = threading.Thread(target=target, daemon=True, name=name)
        self.thread.start()

    def wait(self, timeout_s: float) -> bool:
        """True when the call finished within `timeout_s`."""
        self.thread.join(timeout_s)
        return not self.thread.is_alive()


# --- the heartbeat watchdog -----------------------------------------------------------------


class Watchdog(threading.Thread):
    """Heartbeats the task every few seconds from its own DB connection, even while a long
    tool call runs, and notices a cancel request or a lost lease: it then sets `stop` and the
    stop event of the running tool call (`watch_call`), so a cancel also stops the tool."""

    def __init__(self, *, task_id: Any, epoch: int, interval_s: float) -> None:
        super().__init__(daemon=True, name=f"heartbeat-{task_id}")
        self.task_id = task_id
        self.epoch = epoch
        self.interval_s = interval_s
        self.stop = threading.Event()
        self.cancel_requested = threading.Event()
        self.lease_lost = threading.Event()
        # The global checkpoint round the task must prepare for (None: none asked).
        self.hold_round_id: Any = None
        self._done = threading.Event()
        # Guards `_call_stop` against a halt racing with a call starting or ending.
        self._lock = threading.Lock()
        self._call_stop: threading.Event | None = None

    def watch_call(self, stop: threading.Event | None) -> None:
        """Halting also sets `stop` (the running call's own event); None when no call runs."""
        with self._lock:
            self._call_stop = stop
            if stop is not None and self.stop.is_set():
                stop.set()

    def _halt(self) -> None:
        with self._lock:
            self.stop.set()
            if self._call_stop is not None:
                self._call_stop.set()

    def run(self) -> None:
        try:
            while not self._done.wait(self.interval_s):
                updated = Task.objects.filter(
                    id=self.task_id, lease_epoch=self.epoch, status=TaskStatus.RUNNING
                ).update(heartbeat_at=Now())
                if updated != 1:
                    self.lease_lost.set()
                    self._halt()
                    return
                cancel, hold = (
                    Task.objects.filter(id=self.task_id)
                    .values_list("cancel_requested", "hold_round_id")
                    .get()
                )
                self.hold_round_id = hold
                if cancel:
                    self.cancel_requested.set()
                    self._halt()
        except Exception:  # the loop's own fenced writes will notice a broken database
            log.exception("heartbeat for task %s failed", self.task_id)
        finally:
            connection.close()

    def finish(self) -> None:
        self._done.set()


# --- the run ----------------------------------------------------------------------------------


@dataclass
class ToolOutcome:
    status: str
    observation: str
    result: Any = None
    error_class: str = ""
    error_message: str = ""
    retry_after_s: float | None = None
    # The call ignored its stop and was left running: it may still take effect.
    abandoned: bool = False


class TaskRun:
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
        self.context = context_policy(config=self.config.context, override=self.spec.context)
        self.limits = check_limits(config=self.config.validation, checks=self.spec.checks)
        self.workspace = task.workspace_path
        # The group's shared directory (multiagent/shared.py), if its root asked for one.
        self.shared = shared_dir(task)
        self.pending_events: list[TaskEvent] = []
        self.deferred_rows: list[ToolCall] = []
        # The last captured workspace manifest; None once a tool may have changed the files.
        self.snapshot: dict | None = None
        # Workspace files changed (as tools reported) since `snapshot` was captured.
        self.changed: set[str] = set()
        self.cancel_seen = task.cancel_requested
        # call_id -> ledger row; see load_ledger.
        self.ledger: dict[str, ToolCall] = {}
        self.state = AgentState()
        self.head_id: Any = task.head_checkpoint_id
        self.seq = checkpoint_next_seq(task_id=task.id)
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        # The session clock: wall time since the task first started, less the time it waited
        # for a human (Task.human_wait_s: review and held time, kept by task_transition).
        self.session_started = task.started_at or timezone.now()
        self.human_wait_s = task.human_wait_s
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )
        # MCP sessions of this run (opened on first use, closed when the job ends) and the
        # task's MCP tools by name, as recorded in its first checkpoint.
        self.mcp = McpConnections(task_id=task.id, workspace=self.workspace)
        self.mcp_specs: dict[str, ToolSpec] = {}

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

    def elapsed(self) -> float:
        return self.seconds_before + (time.monotonic() - self.run_started)

    def session_elapsed(self) -> float:
        return (timezone.now() - self.session_started).total_seconds() - self.human_wait_s

    def _usage_fields(self) -> dict[str, Any]:
        return {
            "current_step": self.state.step_index,
            "steps_used": self.state.budget.steps,
            "tokens_used": self.state.budget.tokens,
            "cost_usd": Decimal(f"{self.state.budget.cost_usd:.6f}"),
            "seconds_used": self.elapsed(),
        }

    def commit(
        self,
        *,
        trigger: str | None,
        extra: list[Any] | None = None,
        fields: dict[str, Any] | None = None,
        then: Callable[[Any], None] | None = None,
        level: str | None = None,
    ) -> None:
        """One durable write: [checkpoint] + task row (fenced) + pending events (+ extra rows),
        in one transaction; `then(checkpoint or None)` runs last inside it. `trigger` None, or
        a trigger switched off in harness.yaml, writes no checkpoint; a `level` writes one at
        that level whatever harness.yaml says."""
        configured = self.config.trigger(trigger) if trigger else None
        checkpoint = None
        if configured is not None or (trigger and level):
            checkpoint = checkpoint_build(
                task_id=self.task_id,
                seq=self.seq,
                state=self.state,
                level=level or configured.level,
                trigger=trigger,
                snapshot=self.capture_snapshot(),
                parent_id=self.head_id,
            )
        update = {**self._usage_fields(), **(fields or {})}
        if checkpoint is not None:
            update["head_checkpoint_id"] = checkpoint.id
        # Outcomes of read-only calls ride along with the next write (see execute_call).
        extra = [
            *self.deferred_rows,
            *(row for row in extra or () if row not in self.deferred_rows),
        ]
        self.deferred_rows = []
        # A pause adds `then` (a transition, a review) to the same write: one transaction.
        with transaction.atomic() if then is not None else nullcontext():
            self.cancel_seen = services.task_fenced_write(
                task_id=self.task_id,
                epoch=self.epoch,
                inserts=[
                    *([checkpoint] if checkpoint is not None else []),
                    *(row for row in extra if row._state.adding),
                    *self.pending_events,
                ],
                updates=[(row, _LEDGER_FIELDS) for row in extra if not row._state.adding],
                **update,
            )
            if then is not None:
                then(checkpoint)
        self.pending_events = []
        if checkpoint is not None:
            self.seq += 1
            self.head_id = checkpoint.id

    def pause(
        self,
        *,
        to: str,
        trigger: str,
        reason: str,
        extra: list[Any] | None = None,
        fields: dict[str, Any] | None = None,
        then: Callable[[Any], None] | None = None,
    ) -> NoReturn:
        """End the job leaving the task in `to` (waiting_review or retry_wait): checkpoint,
        rows, events, `then(checkpoint)` and the transition commit together."""

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

    def timeout_event(self, *, layer: str, limit_s: float, **payload: Any) -> None:
        self.event(EventType.TIMEOUT, {"layer": layer, "limit_s": limit_s, **payload})

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
            )
            self.changed = set()
        return self.snapshot

    # -- lifecycle -----------------------------------------------------------------------

    def execute(self) -> str:
        self.watchdog.start()
        try:
            self.start()
            while True:
                self.boundary_checks()
                if self.state.phase == "model":
                    self.model_turn()
                elif self.state.phase == "tools":
                    self.run_tools()
                if self.state.phase == "done":
                    self.finish_success()
                    return "succeeded"
        except Paused:
            return "paused"
        except LeaseLost as exc:
            log.warning("task %s: %s; stopping without further writes", self.task_id, exc)
            return "lease_lost"
        except StopRun as stop:
            return self.finish_stopped(stop)
        except Exception as exc:  # a bug or an infrastructure failure: fail loudly, keep state
            log.exception("task %s crashed", self.task_id)
            return self.finish_stopped(StopRun("internal_error", f"{type(exc).__name__}: {exc}"))
        finally:
            self.watchdog.finish()
            self.mcp.close()

    def start(self) -> None:
        try:
            loaded = checkpoint_load_latest_valid(
                task_id=self.task_id, head_id=self.head_id, epoch=self.epoch
            )
        except NoValidCheckpoint as exc:
            raise StopRun("checkpoint_corrupted", str(exc)) from None
        self.workspace.mkdir(parents=True, exist_ok=True)
        if loaded is None:
            self.state = self.initial_state()
            self.materialise_spec_files()
            self.event(EventType.TASK_STARTED, {"worker": self.worker_id, "epoch": self.epoch})
            self.mcp_tools_list()
            self.commit(trigger="task_start")
            return
        self.state = loaded.state
        self.mcp_tools_list()
        self.load_ledger()
        if loaded.checkpoint.id != self.head_id:
            self.event(
                EventType.CHECKPOINT_FALLBACK,
                {"checkpoint_id": str(loaded.checkpoint.id), "seq": loaded.checkpoint.seq},
            )
            self.head_id = loaded.checkpoint.id
        self.restore_workspace(loaded)
        self.align_context(loaded)
        self.event(
            EventType.RESUMED,
            {
                "worker": self.worker_id,
                "epoch": self.epoch,
                "checkpoint_id": str(loaded.checkpoint.id),
                "seq": loaded.checkpoint.seq,
                "phase": self.state.phase,
            },
        )
        self.commit(trigger=None, fields={"head_checkpoint_id": self.head_id})

    def mcp_tools_list(self) -> None:
        """The task's MCP tools: listed from the servers when it starts (recorded in the state,
        so in the first checkpoint), taken from the state when it resumes."""
        if self.state.mcp_tools is None and mcp_servers_named(self.spec.tools):
            try:
                tools, reports = mcp_tools_discover(connections=self.mcp, names=self.spec.tools)
            except McpUnavailable as exc:
                self.note_mcp_errors()
                if exc.transient:
                    self.retry_mcp_listing(exc)
                raise StopRun("mcp_unavailable", str(exc)) from None
            self.state.mcp_tools = tools
            for report in reports:
                self.event(EventType.MCP_TOOLS_LISTED, report)
        for tool in self.state.mcp_tools or []:
            spec = mcp_tool_spec(tool)
            self.mcp_specs[tool.name] = dataclasses.replace(
                spec, func=self.mcp.caller(tool, idempotent=spec.idempotent)
            )

    def retry_mcp_listing(self, exc: McpUnavailable) -> None:
        """A server that did not answer when the task (re)started: try again after a backoff,
        counted like the attempts of a model turn (the next model decision resets them); the
        task fails with `mcp_unavailable` once they are used up."""
        attempt = self.state.model_retries + 1
        policy = retry_policy(config=self.config, task_override=self.spec.retry)
        if attempt >= policy.max_attempts:
            return
        self.state.model_retries = attempt
        self.schedule_retry(
            attempt=attempt,
            delay_s=policy.delay_s(attempt),
            error=ErrorInfo(
                error_class=TRANSIENT, message=str(exc)[:2000], step_index=self.state.step_index
            ),
        )

    def tool_names(self) -> list[str]:
        """The tools this task may call: the spec's, with `<server>__*` expanded."""
        names = [n for n in self.spec.tools if not n.endswith("__*")]
        return names + [n for n in self.mcp_specs if n not in names]

    def tool(self, name: str) -> ToolSpec:
        spec = self.mcp_specs.get(name)
        return spec if spec is not None else registry.get(name)

    def note_mcp_errors(self) -> None:
        """Connection errors of this run's MCP servers, for the timeline and /ops/."""
        for server, message in self.mcp.errors.items():
            self.event(EventType.MCP_SERVER_ERROR, {"server": server, "message": message})
        self.mcp.errors.clear()

    def initial_state(self) -> AgentState:
        tools = ", ".join(self.spec.tools) or "none"
        system = self.spec.system_prompt or (
            "You are an agent working inside a sandboxed workspace. Use the tools to reach the "
            f"goal, then give a final answer. Available tools: {tools}."
        )
        return AgentState(
            messages=[
                Message(role="system", content=system[: self.context.system_prompt_max_chars]),
                Message(role="user", content=self.spec.goal),
            ],
            hard_facts=goal_facts(self.spec.goal, self.context),
        )

    def materialise_spec_files(self) -> None:
        for rel, content in self.spec.workspace.files.items():
            file_write(self.workspace, rel, content.encode())

    def restore_workspace(self, loaded: Any) -> None:
        """Rebuild the workspace from the checkpoint's snapshot when it is missing here
        (another machine, a wiped disk); after an operator's recovery, bring it in line with
        the head wherever it is."""
        if snapshot_materialise_if_missing(
            workspace=self.workspace, manifest=loaded.snapshot, sync=self.state.recovery is not None
        ):
            self.event(
                EventType.WORKSPACE_MATERIALISED, {"checkpoint_id": str(loaded.checkpoint.id)}
            )

    def align_context(self, loaded: Any) -> None:
        """After a rollback, retry or redispatch, tell the agent what happened (see
        checkpoints.alignment)."""
        summary = context_align(
            task_id=self.task_id,
            state=self.state,
            checkpoint=loaded.checkpoint,
            snapshot=loaded.snapshot,
        )
        if summary is not None:
            self.event(EventType.CONTEXT_ALIGNED, summary)

    def boundary_checks(self) -> None:
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        if self.watchdog.hold_round_id is not None:
            self.prepare_for_round(self.watchdog.hold_round_id)
        # cancel_seen is the task row's flag as of the last commit, which is never further
        # back than the previous model turn or tool call.
        if self.watchdog.cancel_requested.is_set() or self.cancel_seen:
            raise StopRun("canceled", "canceled by operator")
        if (elapsed := self.session_elapsed()) > self.session_s:
            self.timeout_event(layer="session", limit_s=self.session_s, elapsed_s=round(elapsed, 3))
            raise StopRun(
                "timeout", f"session timeout: {self.session_s:g}s exceeded (layer: session)"
            )
        budget = self.spec.budget
        if self.state.phase == "model" and self.state.budget.steps >= budget.max_steps:
            raise StopRun("budget_exceeded", f"max_steps={budget.max_steps} reached")
        if self.state.budget.tokens > budget.max_tokens:
            raise StopRun(
                "budget_exceeded",
                f"max_tokens={budget.max_tokens} exceeded ({self.state.budget.tokens})",
            )

    # -- the model turn ------------------------------------------------------------------

    def allowed_tools(self) -> list[ToolSpec]:
        """The task's tools, their documentation capped by the context policy."""
        cap = self.context.tool_doc_max_chars
        out = []
        for name in self.tool_names():
            try:
                tool = self.tool(name)
            except UnknownTool:
                continue
            if len(tool.description) > cap:
                tool = dataclasses.replace(tool, description=tool.description[: cap - 1] + "…")
            out.append(tool)
        return out

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

    def decide(self) -> ModelDecision:
        """The model call, bounded by the turn timeout even if the adapter ignores it."""
        tools = self.allowed_tools()
        call = InThread(
            lambda: self.model.decide(state=self.state, tools=tools, timeout_s=self.turn_s),
            name=f"model-{self.task_id}",
        )
        if not call.wait(self.turn_s):
            self.timeout_event(layer="turn", limit_s=self.turn_s)
            raise ModelError(
                f"the model call exceeded the {self.turn_s:g}s turn timeout (layer: turn)",
                error_class=TIMEOUT,
            )
        if call.error is not None:
            raise call.error
        decision = call.value
        return dataclasses.replace(
            decision,
            text=nul_free(decision.text),
            final=nul_free(decision.final),
            calls=[
                dataclasses.replace(c, tool=nul_free(c.tool), args=nul_free(c.args))
                for c in decision.calls
            ],
        )

    def model_turn(self) -> None:
        started = time.monotonic()
        try:
            decision = self.decide()
        except ModelError as exc:
            self.on_model_error(exc)
            return
        duration_ms = (time.monotonic() - started) * 1000
        state = self.state
        state.model_retries = 0
        usage = self.charge(decision)
        calls = [
            ProposedCall(
                call_id=state.new_call_id(i), tool=c.tool, args=c.args, raw_error=c.raw_error
            )
            for i, c in enumerate(decision.calls)
        ]
        state.messages.append(
            Message(
                role="assistant", content=decision.text[:OBSERVATION_MAX_CHARS], calls=calls or None
            )
        )
        state.turn_index += 1
        state.last_error = None
        final = decision.final is not None and not calls
        self.event(
            EventType.MODEL_DECISION,
            {
                "turn": state.turn_index,
                **usage,
                "calls": [
                    {
                        "call_id": c.call_id,
                        "tool": c.tool,
                        "args": c.args,
                        **({"raw_error": c.raw_error} if c.raw_error else {}),
                    }
                    for c in calls
                ],
                "final": decision.final,
                "text": decision.text[:2000],
                "duration_ms": round(duration_ms, 3),
            },
        )
        failure = self.check_final_answer(decision.final) if final else None
        if final and failure is None:
            state.final = decision.final
            state.phase = "done"
        elif final:
            # The model tries again: the feedback is the next step's input.
            state.messages.append(
                Message(role="user", name=HARNESS_AUTHOR, content=failure.feedback)
            )
            self.note_check_failure(failure.what)
        else:
            state.pending = calls
            state.next_call = 0
            state.phase = "tools"
        self.commit(trigger="after_model")
        if failure is not None:
            self.finish_step()

    def check_final_answer(self, final: str) -> CheckFailure | None:
        """The TaskSpec's deep checks on a final answer (agent/validation.py)."""
        if self.spec.checks is None:
            return None
        verdict = check_final(
            final=final,
            checks=self.spec.checks,
            workspace=self.workspace,
            task_id=self.task_id,
            goal=self.spec.goal,
            model=self.model,
            timeout_s=self.turn_s,
        )
        payload: dict[str, Any] = {"passed": verdict.failure is None}
        if verdict.review is not None:
            payload.update(self.charge(verdict.review), reviewed=True)
        if verdict.review_skipped:
            payload["review_skipped"] = verdict.review_skipped[:500]
        if verdict.failure is not None:
            payload["feedback"] = verdict.failure.feedback
        self.event(EventType.FINAL_CHECKED, payload)
        return verdict.failure

    def note_check_failure(self, what: str) -> None:
        self.state.checks.failures_this_step += 1
        self.state.checks.last_failure = what[:500]

    def on_model_error(self, exc: ModelError) -> NoReturn:
        """Transient errors (and turn timeouts) are retried with backoff; the task fails once
        the attempts are used up, or at once for a permanent error."""
        attempt = self.state.model_retries + 1
        self.event(
            EventType.MODEL_ERROR,
            {
                "error_class": exc.error_class,
                "message": str(exc)[:2000],
                "status": exc.status,
                "attempt": attempt,
            },
        )
        policy = retry_policy(config=self.config, task_override=self.spec.retry)
        if is_retryable(exc.error_class, idempotent=True) and attempt < policy.max_attempts:
            self.state.model_retries = attempt
            self.schedule_retry(
                attempt=attempt,
                delay_s=policy.delay_s(attempt, retry_after_s=exc.retry_after_s),
                error=ErrorInfo(
                    error_class=exc.error_class,
                    message=str(exc)[:2000],
                    step_index=self.state.step_index,
                ),
            )
        error_class = "model_error" if exc.error_class == "permanent" else exc.error_class
        raise StopRun(error_class, f"model call failed (attempt {attempt}): {exc}")

    # -- tools ---------------------------------------------------------------------------

    def run_tools(self) -> None:
        state = self.state
        while state.next_call < len(state.pending):
            call = state.pending[state.next_call]
            if call.tool == DELEGATE_TOOL and call.tool in self.spec.tools:
                self.await_delegations()
            outcome = self.run_call(call)
            state.messages.append(
                Message(
                    role="tool", content=outcome.observation, call_id=call.call_id, name=call.tool
                )
            )
            if outcome.error_class in CHECK_ERROR_CLASSES:
                self.note_check_failure(outcome.error_message)
            state.next_call += 1
            self.boundary_checks_between_calls()
        self.finish_step()

    def finish_step(self) -> None:
        """Close a step: the retry bound of the validation funnel, the context policy, the
        `after_step` checkpoint."""
        state = self.state
        checks = state.checks
        checks.failed_steps = checks.failed_steps + 1 if checks.failures_this_step else 0
        checks.failures_this_step = 0
        state.step_index += 1
        state.budget.steps += 1
        state.pending = []
        state.next_call = 0
        state.phase = "model"
        if checks.failed_steps > self.limits.max_retries:
            raise StopRun(
                "validation_failed",
                f"{checks.failed_steps} steps in a row failed validation "
                f"(max_retries={self.limits.max_retries}); last: {checks.last_failure}",
            )
        self.apply_context()
        self.event(EventType.STEP_FINISHED, {"step": state.step_index})
        self.commit(trigger="after_step")

    def apply_context(self) -> None:
        report = context_apply(
            state=self.state, policy=self.context, model=self.model, timeout_s=self.turn_s
        )
        if report is None:
            return
        payload: dict[str, Any] = {
            "folded_messages": report.folded_messages,
            "kept_messages": report.kept_messages,
            "method": report.method,
            "new_facts": report.new_facts,
            "summary_chars": report.summary_chars,
        }
        if report.usage is not None:
            payload.update(self.charge(report.usage))
        if report.model_error:
            payload["model_error"] = report.model_error
        self.event(EventType.CONTEXT_FOLDED, payload)

    def boundary_checks_between_calls(self) -> None:
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        if self.watchdog.cancel_requested.is_set():
            raise StopRun("canceled", "canceled by operator")

    def load_ledger(self) -> None:
        """The ledger rows a resumed run may meet again: calls proposed at or after the loaded
        step (a resumed or retried step re-proposes the same call_ids). Only the lease holder
        writes a running task's ledger, so the rows this run creates join as it goes and no
        call needs a query of its own."""
        self.ledger = {
            row.call_id: row
            for row in ToolCall.objects.filter(
                task_id=self.task_id, step_index__gte=self.state.step_index
            )
        }

    def ledger_row(self, call: ProposedCall, tool: ToolSpec | None) -> tuple[ToolCall, bool]:
        row = self.ledger.get(call.call_id)
        if row is not None:
            if row.arguments != call.args and not row.arguments_hash:
                raise StopRun(
                    "idempotency_conflict",
                    f"call_id {call.call_id} reused with different arguments",
                )
            return row, False
        row = ToolCall(
            task_id=self.task_id,
            call_id=call.call_id,
            tool=call.tool,
            arguments=call.args,
            risk=tool.risk if tool else "read",
            step_index=self.state.step_index,
        )
        self.ledger[call.call_id] = row
        return row, True

    def run_call(self, call: ProposedCall) -> ToolOutcome:
        try:
            tool = self.tool(call.tool) if call.tool in self.tool_names() else None
        except UnknownTool:
            tool = None
        row, is_new = self.ledger_row(call, tool)
        if not is_new:
            replay = self.replay_outcome(row)
            if replay is not None:
                return replay
        if tool is None:
            return self.refuse(
                row,
                call,
                error_class="invalid_call",
                what=(f"tool {call.tool!r} is not available to this task"),
                expected=f"one of: {', '.join(self.tool_names()) or '(no tools)'}",
                check="call an available tool or give a final answer",
            )
        if call.raw_error:
            return self.refuse(
                row,
                call,
                error_class="invalid_arguments",
                what=f"could not parse arguments for {tool.name}: {call.raw_error}",
                expected=_schema_hint(tool),
                check=f"send valid JSON arguments for {tool.name}",
            )
        # Approved by a human, or past the gate on an earlier attempt (a retry, or an idempotent
        # call interrupted by a crash): runs exactly as recorded.
        cleared = row.status in (
            ToolCallStatus.APPROVED,
            ToolCallStatus.RETRY_WAIT,
            ToolCallStatus.RUNNING,
        )
        args_source = row.arguments if cleared else call.args
        try:
            args = tool.args_model.model_validate(args_source)
        except ValidationError as exc:
            return self.refuse(
                row,
                call,
                error_class="invalid_arguments",
                what=f"invalid arguments for {tool.name} ({_validation_summary(exc)})",
                expected=_schema_hint(tool),
                check=f"fix the arguments and call {tool.name} again",
            )
        if cleared:
            if row.arguments_hash and canonical_hash(row.arguments) != row.arguments_hash:
                raise StopRun(
                    "internal_error",
                    f"call {call.call_id}: approved arguments changed after approval",
                )
            return self.execute_call(row, tool, args)
        # Stricter checks before the policy gate: no human reviews a call that breaks them.
        failure = check_call(tool=tool, args=row.arguments, limits=self.limits)
        if failure is not None:
            return self.refuse(
                row,
                call,
                error_class="check_failed",
                what=failure.what,
                expected=failure.expected,
                check=failure.check,
            )
        return self.gate_and_execute(row, tool, args)

    def replay_outcome(self, row: ToolCall) -> ToolOutcome | None:
        """A call already settled in the ledger returns its stored outcome, never re-runs."""
        if row.status == ToolCallStatus.SUCCEEDED:
            self.event(EventType.TOOL_REPLAYED, {"call_id": row.call_id, "tool": row.tool})
            return ToolOutcome(
                status=row.status, observation=_observation(row.result), result=row.result
            )
        if row.status in (
            ToolCallStatus.FAILED,
            ToolCallStatus.TIMED_OUT,
            ToolCallStatus.DENIED,
            ToolCallStatus.REJECTED,
        ):
            result = row.result if isinstance(row.result, dict) else {}
            message = result.get("observation")
            return ToolOutcome(
                status=row.status,
                observation=message or row.error_message,
                error_class=row.error_class,
                error_message=row.error_message,
            )
        if row.status in (ToolCallStatus.RUNNING, ToolCallStatus.UNKNOWN_OUTCOME):
            return self.on_interrupted_call(row)
        return None

    def on_interrupted_call(self, row: ToolCall) -> ToolOutcome | None:
        """The ledger says this call was running when its worker stopped. An idempotent tool
        runs again with the same call_id; a non-idempotent one is never blindly re-run: its
        outcome is unknown and a human decides (mark it done, re-run it, or fail the task)."""
        try:
            tool = self.tool(row.tool)
        except UnknownTool:
            tool = None
        if row.status == ToolCallStatus.RUNNING and tool is not None and tool.idempotent:
            self.event(EventType.TOOL_RERUN_IDEMPOTENT, {"call_id": row.call_id, "tool": row.tool})
            return None
        self.escalate_unknown_outcome(row)

    def escalate_unknown_outcome(self, row: ToolCall, *, message: str | None = None) -> NoReturn:
        message = message or (
            f"{row.tool} (call {row.call_id}) was running when its worker stopped; it is not "
            "idempotent, so whether it took effect is unknown"
        )
        if row.status == ToolCallStatus.RUNNING:
            finished = timezone.now()
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.UNKNOWN_OUTCOME,
                now=finished,
                fields={"error_class": UNKNOWN_OUTCOME, "error_message": message},
                write=False,
            )
            row.attempt_log = [
                *row.attempt_log,
                {
                    "n": row.attempts,
                    "started_at": row.started_at.isoformat() if row.started_at else None,
                    "finished_at": finished.isoformat(),
                    "status": UNKNOWN_OUTCOME,
                    "error_class": UNKNOWN_OUTCOME,
                    "error_message": message,
                },
            ]
            self.event(
                EventType.TOOL_UNKNOWN_OUTCOME,
                {"call_id": row.call_id, "tool": row.tool, "attempt": row.attempts},
            )
        open_review = not row.reviews.filter(status=ReviewStatus.PENDING).exists()
        decision = PolicyDecision(
            action="review",
            reason="outcome unknown: mark it done, re-run it or fail the task",
            rules=[{"name": "unknown-outcome", "tool": row.tool, "action": "review"}],
        )

        def open_unknown_outcome_review(checkpoint: Any) -> None:
            if open_review:
                review_request_open(
                    tool_call=row,
                    checkpoint_id=checkpoint.id if checkpoint else None,
                    decision=decision,
                    kind=UNKNOWN_OUTCOME,
                    preview=f"{message}.\n\n"
                    + json.dumps(row.arguments, indent=2, ensure_ascii=False),
                )

        if open_review:
            self.event(
                EventType.REVIEW_REQUESTED,
                {
                    "call_id": row.call_id,
                    "tool": row.tool,
                    "kind": UNKNOWN_OUTCOME,
                    "reason": decision.reason,
                },
            )
        self.pause(
            to=TaskStatus.WAITING_REVIEW,
            trigger="before_review",
            reason=f"unknown outcome: {row.tool}",
            extra=[row],
            then=open_unknown_outcome_review,
        )

    def refuse(
        self,
        row: ToolCall,
        call: ProposedCall,
        *,
        error_class: str,
        what: str,
        expected: str,
        check: str,
        status: str = ToolCallStatus.FAILED,
    ) -> ToolOutcome:
        feedback = compact_feedback(what=what, expected=expected, check=check)
        self.state.budget.invalid_calls += error_class in ("invalid_arguments", "invalid_call")
        services.toolcall_transition(
            call=row,
            to=status,
            fields={
                "error_class": error_class,
                "error_message": what,
                "result": {"observation": feedback},
            },
            write=False,
        )
        self.event(
            EventType.TOOL_REFUSED,
            {
                "call_id": call.call_id,
                "tool": call.tool,
                "error_class": error_class,
                "feedback": feedback,
            },
        )
        self.commit(trigger=None, extra=[row])
        return ToolOutcome(
            status=status, observation=feedback, error_class=error_class, error_message=what
        )

    def gate_and_execute(self, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
        decision = policy.evaluate(tool=tool, args=row.arguments, spec=self.task.spec)
        if decision.action == "deny":
            return self.refuse(
                row,
                ProposedCall(call_id=row.call_id, tool=row.tool, args=row.arguments),
                error_class="denied",
                status=ToolCallStatus.DENIED,
                what=f"{tool.name} was denied by policy: {decision.reason}",
                expected="a call the policy allows",
                check="choose a safer action or explain in the final answer why it is needed",
            )
        if decision.action == "review":
            self.pause_for_review(row, tool, args, decision)
        return self.execute_call(row, tool, args)

    def pause_for_review(self, row: ToolCall, tool: ToolSpec, args: Any, decision: Any) -> None:
        ctx = self.tool_context(row)
        preview = ""
        if tool.preview is not None:
            try:
                preview = tool.preview(ctx, args)
            except Exception as exc:  # a preview must never block the pause
                preview = f"(preview unavailable: {exc})"
        else:
            preview = json.dumps(row.arguments, indent=2, ensure_ascii=False)
        services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
        self.event(
            EventType.REVIEW_REQUESTED,
            {
                "call_id": row.call_id,
                "tool": tool.name,
                "rules": decision.rules,
                "reason": decision.reason,
            },
        )
        self.pause(
            to=TaskStatus.WAITING_REVIEW,
            trigger="before_review",
            reason=f"review: {tool.name}",
            extra=[row],
            then=lambda checkpoint: review_request_open(
                tool_call=row,
                checkpoint_id=checkpoint.id if checkpoint else None,
                decision=decision,
                preview=preview,
            ),
        )

    def tool_context(self, row: ToolCall) -> ToolContext:
        # Each call has its own stop event: a timed-out, abandoned call keeps seeing it set.
        return ToolContext(
            task_id=str(self.task_id),
            call_id=row.call_id,
            workspace=self.workspace,
            timeout_s=self.tool_s,
            shared=self.shared,
        )

    def execute_call(self, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
        self.checkpoint_group_before(row, tool)
        timeout_s = min(tool.timeout_s, self.tool_s)
        ctx = self.tool_context(row)
        ctx.timeout_s = timeout_s
        services.toolcall_transition(
            call=row,
            to=ToolCallStatus.RUNNING,
            fields={"attempts": row.attempts + 1},
            write=False,
        )
        self.event(
            EventType.TOOL_STARTED,
            {
                "call_id": row.call_id,
                "tool": tool.name,
                "attempt": row.attempts,
                "args": row.arguments,
            },
        )
        if tool.side_effect:
            # The intent is durable (with a checkpoint) before the side effect starts.
            trigger = (
                "before_external_call" if tool.risk == "external" else "before_write_operation"
            )
            self.commit(trigger=trigger, extra=[row])
        outcome = self.invoke(tool, ctx, args)
        if tool.server:
            self.note_mcp_errors()
        if outcome.error_class == UNKNOWN_OUTCOME and tool.side_effect and not tool.idempotent:
            # The tool itself cannot tell whether it took effect (an MCP server that died or
            # timed out mid-call).
            self.escalate_unknown_outcome(row, message=outcome.error_message)
        if outcome.abandoned and tool.side_effect and not tool.idempotent:
            # Timed out, ignored its stop, and may still act: neither "failed" (the model would
            # try again, a duplicate) nor "succeeded" is known. A human decides.
            self.escalate_unknown_outcome(
                row,
                message=(
                    f"{tool.name} (call {row.call_id}) timed out after {timeout_s:g}s and did not "
                    "stop; it is not idempotent, so whether it took effect is unknown"
                ),
            )
        if outcome.status == ToolCallStatus.SUCCEEDED:
            failure = check_result(tool=tool, result=outcome.result)
            if failure is not None:
                outcome = ToolOutcome(
                    status=ToolCallStatus.FAILED,
                    result=outcome.result,
                    observation=failure.feedback,
                    error_class="check_failed",
                    error_message=failure.what,
                )
        finished = timezone.now()
        services.toolcall_transition(
            call=row,
            to=outcome.status,
            now=finished,
            fields={
                "result": (
                    outcome.result
                    if outcome.status == ToolCallStatus.SUCCEEDED
                    else {
                        "observation": outcome.observation,
                        **({"result": outcome.result} if outcome.result is not None else {}),
                    }
                ),
                "error_class": outcome.error_class,
                "error_message": outcome.error_message,
                "duration_ms": (finished - row.started_at).total_seconds() * 1000,
            },
            write=False,
        )
        row.attempt_log = [
            *row.attempt_log,
            {
                "n": row.attempts,
                "started_at": row.started_at.isoformat(),
                "finished_at": finished.isoformat(),
                "status": outcome.status,
                "error_class": outcome.error_class,
                "error_message": outcome.error_message[:500],
            },
        ]
        self.event(
            EventType.TOOL_FINISHED,
            {
                "call_id": row.call_id,
                "tool": tool.name,
                "status": outcome.status,
                "attempt": row.attempts,
                "duration_ms": round(row.duration_ms, 3),
                "error_class": outcome.error_class,
            },
        )
        if outcome.error_class == TIMEOUT:
            self.timeout_event(layer="tool", limit_s=timeout_s, call_id=row.call_id, tool=tool.name)
        if outcome.error_class == "canceled":
            self.commit(trigger=None, extra=[row])
            raise StopRun("canceled", "canceled by operator")
        if outcome.status != ToolCallStatus.SUCCEEDED:
            self.retry_or_settle(row, tool, outcome)
        if tool.side_effect:
            self.commit(trigger=None, extra=[row])
        else:
            # Nothing outside the harness changed: the outcome is written with the step's next
            # write (at the latest `after_step`). A crash before then re-runs a read-only call.
            self.deferred_rows.append(row)
        return outcome

    def retry_or_settle(self, row: ToolCall, tool: ToolSpec, outcome: ToolOutcome) -> None:
        """A failed attempt: schedule the next one (same call_id) when the error is retryable
        and attempts remain; otherwise the failure stands and goes back to the model."""
        if not is_retryable(outcome.error_class, idempotent=tool.idempotent):
            return
        policy = retry_policy(
            config=self.config, tool_override=tool.retry, task_override=self.spec.retry
        )
        if row.attempts >= policy.max_attempts:
            if row.attempts == 1:
                return
            outcome.observation = compact_feedback(
                what=f"{tool.name} failed {row.attempts} times; last error: "
                f"{outcome.error_message}",
                expected=f"{tool.name} to succeed",
                check="try later or take another approach",
            )
            row.result = {"observation": outcome.observation}
            return
        services.toolcall_transition(call=row, to=ToolCallStatus.RETRY_WAIT, write=False)
        self.schedule_retry(
            attempt=row.attempts,
            delay_s=policy.delay_s(row.attempts, retry_after_s=outcome.retry_after_s),
            error=ErrorInfo(
                error_class=outcome.error_class,
                message=outcome.error_message[:2000],
                step_index=self.state.step_index,
                call_id=row.call_id,
            ),
            extra=[row],
        )

    def invoke(self, tool: ToolSpec, ctx: ToolContext, args: Any) -> ToolOutcome:
        """Run the tool in a helper thread so the timeout holds even for tools that ignore
        it. On timeout `ctx.stop` is set — cooperating tools stop, run_command kills its
        process group — and after a short grace the call is abandoned: its late result is
        never recorded, and its stop event stays set."""
        self.watchdog.watch_call(ctx.stop)
        # The files the call changes are known only from a tool that reports them, and only
        # once it has returned (an abandoned call may still write).
        snapshot, self.snapshot = self.snapshot, None
        try:
            call = InThread(lambda: tool.func(ctx, args), name=f"tool-{ctx.call_id}")
            if not call.wait(ctx.timeout_s):
                ctx.stop.set()
                abandoned = not call.wait(TOOL_STOP_GRACE_S)
                if not abandoned and tool.reports_changes:
                    self.snapshot = snapshot
                    self.changed |= ctx.changed
                if self.watchdog.cancel_requested.is_set():
                    return self.failed_outcome(
                        tool, ToolError("stopped: task canceled", error_class="canceled")
                    )
                message = f"{tool.name} exceeded its {ctx.timeout_s:g}s timeout (layer: tool)"
                return ToolOutcome(
                    status=ToolCallStatus.TIMED_OUT,
                    error_class=TIMEOUT,
                    error_message=message,
                    abandoned=abandoned,
                    observation=compact_feedback(
                        what=message,
                        expected=f"{tool.name} to finish in time",
                        check="use smaller inputs or a different approach",
                    ),
                )
        finally:
            self.watchdog.watch_call(None)
        if tool.reports_changes:
            self.snapshot = snapshot
            self.changed |= ctx.changed
        if call.error is not None:
            return self.failed_outcome(tool, call.error)
        result = call.value
        if hasattr(result, "model_dump"):
            result = result.model_dump(mode="json")
        try:
            json.dumps(result)
        except (TypeError, ValueError):
            result = {"value": str(result)}
        result = nul_free(result)
        return ToolOutcome(
            status=ToolCallStatus.SUCCEEDED, observation=_observation(result), result=result
        )

    def failed_outcome(self, tool: ToolSpec, exc: BaseException) -> ToolOutcome:
        """Classify a tool's exception: its own ToolError class, else by exception type."""
        if isinstance(exc, ToolError):
            error_class, retry_after_s, what = exc.error_class, exc.retry_after_s, str(exc)
        else:
            log.error("tool %s raised", tool.name, exc_info=exc)
            error_class, retry_after_s = classify_exception(exc), None
            what = f"{type(exc).__name__}: {exc}"
        what = nul_free(what)
        status = ToolCallStatus.FAILED
        if error_class == TIMEOUT:
            status = ToolCallStatus.TIMED_OUT
            what = f"{what} (layer: tool)"
        return ToolOutcome(
            status=status,
            error_class=error_class,
            error_message=what,
            retry_after_s=retry_after_s,
            observation=compact_feedback(
                what=f"{tool.name} failed: {what}",
                expected=f"{tool.name} to succeed",
                check="read the error and adjust the arguments",
            ),
        )

    # -- multi-agent groups (multiagent/) -----------------------------------------------

    def await_delegations(self) -> None:
        """The delegate calls of this step start their children together; the parent then
        waits without a worker until all of them have ended, and their outcomes become the
        calls' results (run_call replays them from the ledger)."""
        state = self.state
        tool = registry.get(DELEGATE_TOOL)
        new: list[tuple[ToolCall, delegation.Delegation]] = []
        refused: list[ToolCall] = []
        started: list[ToolCall] = []
        for call in state.pending[state.next_call :]:
            if call.tool != DELEGATE_TOOL or call.raw_error:
                continue
            row, _ = self.ledger_row(call, tool)
            if row.status == ToolCallStatus.RUNNING:
                started.append(row)
            elif row.status in (ToolCallStatus.PROPOSED, ToolCallStatus.APPROVED):
                plan = delegation.delegation_plan(
                    spec=self.spec,
                    title=self.task.title,
                    call_id=call.call_id,
                    # An approved call starts with the arguments the reviewer approved.
                    arguments=row.arguments,
                    steps_used=state.budget.steps,
                    tokens_used=state.budget.tokens,
                )
                if isinstance(plan, str):
                    services.toolcall_transition(
                        call=row,
                        to=ToolCallStatus.FAILED,
                        fields={
                            "error_class": "invalid_call",
                            "error_message": plan,
                            "result": {"observation": plan},
                        },
                        write=False,
                    )
                    refused.append(row)
                elif row.status == ToolCallStatus.PROPOSED and self.delegation_denied(
                    row, tool, plan
                ):
                    refused.append(row)
                else:
                    new.append((row, plan))
        if new:
            now = timezone.now()
            for row, plan in new:
                services.toolcall_transition(
                    call=row,
                    to=ToolCallStatus.RUNNING,
                    now=now,
                    fields={"attempts": 1},
                    write=False,
                )
                self.event(
                    EventType.DELEGATED,
                    {"call_id": row.call_id, "agent": plan.args.agent, "goal": plan.args.goal},
                )
            self.pause(
                to=TaskStatus.WAITING_CHILDREN,
                trigger="before_delegate",
                reason=f"waiting for {len(new) + len(started)} child task(s)",
                extra=[*refused, *(row for row, _ in new)],
                then=lambda _checkpoint: delegation.delegation_start(
                    parent=self.task, delegations=[plan for _, plan in new]
                ),
            )
        children = delegation.delegation_children(
            parent_id=self.task_id, call_ids=[row.call_id for row in started]
        )
        if any(not child.is_terminal for child in children.values()):
            self.pause(
                to=TaskStatus.WAITING_CHILDREN,
                trigger=None,
                reason="waiting for child tasks",
                extra=refused,
            )
        for row in started:
            child = children.get(row.call_id)
            delegation.delegation_settle(row=row, child=child)
            tokens, cost = delegation.child_usage(child)
            state.budget.tokens += tokens
            state.budget.cost_usd += cost
            self.event(
                EventType.DELEGATION_FINISHED,
                {"call_id": row.call_id, "status": row.status, "child": row.result.get("task_id")},
            )
        if started or refused:
            self.commit(trigger=None, extra=[*refused, *started])

    def delegation_denied(self, row: ToolCall, tool: ToolSpec, plan: Any) -> bool:
        """A delegate call meets the review policy like any other call before its child
        starts: denied, it is refused (True); to be reviewed, the task pauses until a human
        decides (an approved call starts its child when the task resumes)."""
        decision = policy.evaluate(tool=tool, args=row.arguments, spec=self.task.spec)
        if decision.action == "review":
            self.pause_for_review(row, tool, plan.args, decision)
        if decision.action != "deny":
            return False
        what = f"{tool.name} was denied by policy: {decision.reason}"
        feedback = compact_feedback(
            what=what,
            expected="a call the policy allows",
            check="do the work yourself or explain in the final answer why it is needed",
        )
        services.toolcall_transition(
            call=row,
            to=ToolCallStatus.DENIED,
            fields={
                "error_class": "denied",
                "error_message": what,
                "result": {"observation": feedback},
            },
            write=False,
        )
        self.event(
            EventType.TOOL_REFUSED,
            {"call_id": row.call_id, "tool": row.tool, "error_class": "denied", "feedback": what},
        )
        return True

    def prepare_for_round(self, round_id: Any, *, hold: bool = True) -> None:
        """Two-phase commit, phase one: at this step boundary write a local checkpoint and a
        vote in one write, then hold (`prepared`; the job ends) until the round ends. Without
        `hold` (a round this task opened itself), it goes on at once when its vote completes
        the round, and holds only while another participant has yet to prepare."""
        voted: list[bool] = []

        def vote(checkpoint: Any) -> None:
            if coordinator.round_vote(
                round_id=round_id, task_id=self.task_id, checkpoint_id=checkpoint.id
            ):
                if hold:
                    self.hold_prepared()
                voted.append(True)

        self.event(EventType.GLOBAL_PREPARE, {"round_id": str(round_id)})
        self.commit(trigger="global_prepare", level="step", then=vote)
        self.watchdog.hold_round_id = None
        if not voted:
            return
        # This vote may complete the round: commit it now rather than at the next sweep.
        coordinator.round_advance(round_id=round_id)
        if hold:
            raise Paused()
        with transaction.atomic():
            if not coordinator.round_still_holds(round_id=round_id, task_id=self.task_id):
                return
            self.hold_prepared()
        raise Paused()

    def hold_prepared(self) -> None:
        services.task_transition(
            task_id=self.task_id,
            to=TaskStatus.PREPARED,
            expect_epoch=self.epoch,
            reason="prepared for a global checkpoint",
            fields={"worker_id": ""},
        )

    def checkpoint_group_before(self, row: ToolCall, tool: ToolSpec) -> None:
        """Trigger `before_side_effects` (harness.yaml multi_agent.global_checkpoints): a
        global checkpoint of the group before its root runs a side-effecting call. The root
        prepares right here; its children are stopped by then (a parent waits for them), so
        the round usually commits at once and the call goes ahead."""
        if (
            not tool.side_effect
            or tool.name == DELEGATE_TOOL
            or self.task.parent_id is not None
            or not self.spec.agents
            or "before_side_effects" not in self.config.multi_agent.global_checkpoints
        ):
            return
        round_id = coordinator.round_before_call(
            root_id=self.task_id, call_id=row.call_id, tool=tool.name
        )
        if round_id is not None:
            self.prepare_for_round(round_id, hold=False)

    def wake_parent(self) -> None:
        """A child that ended may be the last one its parent waits for; a participant that
        ended before it could prepare may be the last one a round waits for."""
        try:
            if self.task.parent_id is not None:
                delegation.delegation_wake(parent_id=self.task.parent_id)
            hold = Task.objects.values_list("hold_round_id", flat=True).get(id=self.task_id)
            if hold is not None:
                coordinator.round_advance(round_id=hold)
        except Exception:  # the sweep does it later
            log.exception("task %s: waking its parent or advancing its round failed", self.task_id)

    # -- endings -------------------------------------------------------------------------

    def finish_success(self) -> None:
        self.event(EventType.TASK_FINISHED, {"result": (self.state.final or "")[:2000]})
        self.commit(trigger=None)
        with transaction.atomic():
            services.events_record(self.pending_events)
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.SUCCEEDED,
                expect_epoch=self.epoch,
                reason="final answer",
                fields={"result": self.state.final or "", **self._usage_fields()},
            )
        self.pending_events = []
        self.wake_parent()

    def finish_stopped(self, stop: StopRun) -> str:
        to = TaskStatus.CANCELED if stop.error_class == "canceled" else TaskStatus.FAILED
        self.state.last_error = ErrorInfo(
            error_class=stop.error_class,
            message=stop.message[:2000],
            step_index=self.state.step_index,
        )
        self.event(
            EventType.TASK_STOPPED,
            {"error_class": stop.error_class, "message": stop.message[:2000]},
        )
        try:
            trigger = (
                "after_step"
                if stop.error_class in ("timeout", "budget_exceeded", "validation_failed")
                else None
            )
            self.commit(trigger=trigger)
            services.task_transition(
                task_id=self.task_id,
                to=to,
                expect_epoch=self.epoch,
                reason=stop.message[:500],
                fields={
                    "error_class": stop.error_class,
                    "error_message": stop.message[:5000],
                    **self._usage_fields(),
                },
            )
        except LeaseLost:
            return "lease_lost"
        self.wake_parent()
        return str(to)


def task_run(*, task_id: Any) -> str:
    """Run a queued task (or one whose retry backoff has elapsed) until it finishes, pauses or
    fails. A duplicate job exits untouched; with no free capacity the task is put back on its
    queue after a short delay."""
    worker_id = worker_identity()
    try:
        task = services.task_acquire(task_id=task_id, worker_id=worker_id)
        if task is None and services.task_wake(task_id=task_id):
            task = services.task_acquire(task_id=task_id, worker_id=worker_id)
    except services.CapacityFull:
        services.task_defer(task_id=task_id)
        return "deferred"
    if task is None:
        log.info("task %s is not queued; nothing to do", task_id)
        return "skipped"
    return TaskRun(task, worker_id).execute()
