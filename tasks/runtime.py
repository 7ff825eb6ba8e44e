"""The agent loop, run inside an RQ job (`tasks.jobs.run_task`).

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
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone
from pydantic import ValidationError

from checkpoints.services import (
    NoValidCheckpoint,
    checkpoint_build,
    checkpoint_load_latest_valid,
    checkpoint_next_seq,
)
from harness_site.config import harness_config
from tasks import services
from tasks.agent_state import AgentState, ErrorInfo, Message, ProposedCall
from tasks.canonical import canonical_hash
from tasks.context import HARNESS_AUTHOR, context_apply, context_policy, goal_facts
from tasks.llm import ModelDecision, ModelError, model_for_spec
from tasks.models import Task, TaskEvent, ToolCall, ToolCallStatus
from tasks.spec import TaskSpec
from tasks.states import LeaseLost, TaskStatus
from tasks.tools.registry import ToolContext, ToolError, ToolSpec, UnknownTool, registry
from tasks.validation import (
    CHECK_ERROR_CLASSES,
    CheckFailure,
    check_call,
    check_final,
    check_limits,
    check_result,
    compact_feedback,
)

log = logging.getLogger(__name__)

OBSERVATION_MAX_CHARS = 4000


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
    fields = [f"{name}{'' if name in required else '?'}: {p.get('type', 'any')}"
              for name, p in props.items()]
    return "{" + ", ".join(fields) + "}"


def _observation(result: Any) -> str:
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False,
                                                             default=str)
    if len(text) > OBSERVATION_MAX_CHARS:
        text = text[:OBSERVATION_MAX_CHARS] + f"… [truncated {len(text) - OBSERVATION_MAX_CHARS} chars]"
    return text


_LEDGER_FIELDS = ["arguments", "arguments_hash", "status", "result", "error_class",
                  "error_message", "attempts", "attempt_log", "started_at", "finished_at",
                  "duration_ms"]


def _save_ledger_row(row: ToolCall) -> None:
    if row._state.adding:
        row.save(force_insert=True)
    else:
        row.save(update_fields=_LEDGER_FIELDS)


# --- the heartbeat watchdog -----------------------------------------------------------------


class Watchdog(threading.Thread):
    """Heartbeats the task every few seconds from its own DB connection, even while a long
    tool call runs, and notices a cancel request or a lost lease: it then sets `stop`, which
    running tools poll, so a cancel also stops the running tool."""

    def __init__(self, *, task_id: Any, epoch: int, interval_s: float) -> None:
        super().__init__(daemon=True, name=f"heartbeat-{task_id}")
        self.task_id = task_id
        self.epoch = epoch
        self.interval_s = interval_s
        self.stop = threading.Event()
        self.cancel_requested = threading.Event()
        self.lease_lost = threading.Event()
        self._done = threading.Event()

    def run(self) -> None:
        try:
            while not self._done.wait(self.interval_s):
                now = timezone.now()
                updated = Task.objects.filter(
                    id=self.task_id, lease_epoch=self.epoch, status=TaskStatus.RUNNING
                ).update(heartbeat_at=now)
                if updated != 1:
                    self.lease_lost.set()
                    self.stop.set()
                    return
                if Task.objects.filter(id=self.task_id, cancel_requested=True).exists():
                    self.cancel_requested.set()
                    self.stop.set()
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
        self.pending_events: list[TaskEvent] = []
        self.cancel_seen = task.cancel_requested
        # call_id -> ledger row; see load_ledger.
        self.ledger: dict[str, ToolCall] = {}
        self.state = AgentState()
        self.head_id: Any = task.head_checkpoint_id
        self.seq = checkpoint_next_seq(task_id=task.id)
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        self.watchdog = Watchdog(task_id=task.id, epoch=self.epoch,
                                 interval_s=settings.HARNESS_HEARTBEAT_S)

    # -- bookkeeping ---------------------------------------------------------------------

    def event(self, type: str, payload: dict | None = None) -> None:
        self.pending_events.append(services.event_build(
            task_id=self.task_id, type=type, payload=payload, step_index=self.state.step_index,
        ))

    def elapsed(self) -> float:
        return self.seconds_before + (time.monotonic() - self.run_started)

    def _usage_fields(self) -> dict[str, Any]:
        return {
            "current_step": self.state.step_index,
            "steps_used": self.state.budget.steps,
            "tokens_used": self.state.budget.tokens,
            "cost_usd": Decimal(f"{self.state.budget.cost_usd:.6f}"),
            "seconds_used": self.elapsed(),
        }

    def commit(self, *, trigger: str | None, extra: list[Any] | None = None,
               fields: dict[str, Any] | None = None) -> None:
        """One durable write: [checkpoint] + task row (fenced) + pending events (+ extra rows),
        in one transaction. `trigger` None, or a trigger switched off in harness.yaml, writes
        no checkpoint."""
        configured = self.config.trigger(trigger) if trigger else None
        checkpoint = None
        if configured is not None:
            checkpoint = checkpoint_build(
                task_id=self.task_id, seq=self.seq, state=self.state, level=configured.level,
                trigger=trigger, snapshot=self.capture_snapshot(), parent_id=self.head_id,
            )
        update = {**self._usage_fields(), **(fields or {})}
        if checkpoint is not None:
            update["head_checkpoint_id"] = checkpoint.id
        extra = list(extra or ())
        self.cancel_seen = services.task_fenced_write(
            task_id=self.task_id, epoch=self.epoch,
            inserts=[*([checkpoint] if checkpoint is not None else []),
                     *(row for row in extra if row._state.adding), *self.pending_events],
            updates=[(row, _LEDGER_FIELDS) for row in extra if not row._state.adding],
            **update)
        self.pending_events = []
        if checkpoint is not None:
            self.seq += 1
            self.head_id = checkpoint.id

    def capture_snapshot(self) -> dict | None:
        """The workspace manifest stored with a checkpoint (see checkpoints.snapshots)."""
        from checkpoints.snapshots import snapshot_capture

        return snapshot_capture(task_id=self.task_id, workspace=self.workspace)

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

    def start(self) -> None:
        try:
            loaded = checkpoint_load_latest_valid(task_id=self.task_id, head_id=self.head_id)
        except NoValidCheckpoint as exc:
            raise StopRun("checkpoint_corrupted", str(exc)) from None
        self.workspace.mkdir(parents=True, exist_ok=True)
        if loaded is None:
            self.state = self.initial_state()
            self.materialise_spec_files()
            self.event("task_started", {"worker": self.worker_id, "epoch": self.epoch})
            self.commit(trigger="task_start")
            return
        self.state = loaded.state
        self.load_ledger()
        if loaded.checkpoint.id != self.head_id:
            self.event("checkpoint_fallback", {"checkpoint_id": str(loaded.checkpoint.id),
                                               "seq": loaded.checkpoint.seq})
            self.head_id = loaded.checkpoint.id
        self.restore_workspace(loaded)
        self.align_context(loaded)
        self.event("resumed", {"worker": self.worker_id, "epoch": self.epoch,
                               "checkpoint_id": str(loaded.checkpoint.id),
                               "seq": loaded.checkpoint.seq, "phase": self.state.phase})
        self.commit(trigger=None, fields={"head_checkpoint_id": self.head_id})

    def initial_state(self) -> AgentState:
        tools = ", ".join(self.spec.tools) or "none"
        system = self.spec.system_prompt or (
            "You are an agent working inside a sandboxed workspace. Use the tools to reach the "
            f"goal, then give a final answer. Available tools: {tools}."
        )
        return AgentState(messages=[
            Message(role="system", content=system[: self.context.system_prompt_max_chars]),
            Message(role="user", content=self.spec.goal),
        ], hard_facts=goal_facts(self.spec.goal, self.context))

    def materialise_spec_files(self) -> None:
        from tasks.tools.workspace import resolve_in_workspace

        for rel, content in self.spec.workspace.files.items():
            target = resolve_in_workspace(self.workspace, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)

    def restore_workspace(self, loaded: Any) -> None:
        """Rebuild the workspace from the checkpoint's snapshot when it is missing here
        (another machine, a wiped disk); after an operator's recovery, bring it in line with
        the head wherever it is."""
        from checkpoints.snapshots import snapshot_materialise_if_missing

        if snapshot_materialise_if_missing(workspace=self.workspace, manifest=loaded.snapshot,
                                           sync=self.state.recovery is not None):
            self.event("workspace_materialised", {"checkpoint_id": str(loaded.checkpoint.id)})

    def align_context(self, loaded: Any) -> None:
        """After a rollback, retry or redispatch, tell the agent what happened (see
        checkpoints.alignment)."""
        from checkpoints.alignment import context_align

        summary = context_align(task_id=self.task_id, state=self.state,
                                checkpoint=loaded.checkpoint, snapshot=loaded.snapshot)
        if summary is not None:
            self.event("context_aligned", summary)

    def boundary_checks(self) -> None:
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        # cancel_seen is the task row's flag as of the last commit, which is never further
        # back than the previous model turn or tool call.
        if self.watchdog.cancel_requested.is_set() or self.cancel_seen:
            raise StopRun("canceled", "canceled by operator")
        if self.elapsed() > self.session_s:
            raise StopRun("timeout", f"session timeout: {self.session_s:g}s exceeded "
                                     "(layer: session)")
        budget = self.spec.budget
        if self.state.phase == "model" and self.state.budget.steps >= budget.max_steps:
            raise StopRun("budget_exceeded", f"max_steps={budget.max_steps} reached")
        if self.state.budget.tokens > budget.max_tokens:
            raise StopRun("budget_exceeded",
                          f"max_tokens={budget.max_tokens} exceeded ({self.state.budget.tokens})")

    # -- the model turn ------------------------------------------------------------------

    def allowed_tools(self) -> list[ToolSpec]:
        """The task's tools, their documentation capped by the context policy."""
        cap = self.context.tool_doc_max_chars
        out = []
        for name in self.spec.tools:
            try:
                tool = registry.get(name)
            except UnknownTool:
                continue
            if len(tool.description) > cap:
                tool = dataclasses.replace(tool, description=tool.description[: cap - 1] + "…")
            out.append(tool)
        return out

    def charge(self, usage: ModelDecision) -> dict[str, Any]:
        """Count a model call's tokens and cost against the task; the event fields for it."""
        model = usage.model or self.model.name
        cost = self.config.cost_usd(model=model, prompt_tokens=usage.prompt_tokens,
                                    completion_tokens=usage.completion_tokens)
        self.state.budget.tokens += usage.tokens
        self.state.budget.cost_usd += cost
        return {"model": model, "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens, "cost_usd": round(cost, 8)}

    def model_turn(self) -> None:
        started = time.monotonic()
        try:
            decision: ModelDecision = self.model.decide(
                state=self.state, tools=self.allowed_tools(), timeout_s=self.turn_s
            )
        except ModelError as exc:
            self.on_model_error(exc)
            return
        duration_ms = (time.monotonic() - started) * 1000
        state = self.state
        usage = self.charge(decision)
        calls = [
            ProposedCall(call_id=state.new_call_id(i), tool=c.tool, args=c.args,
                         raw_error=c.raw_error)
            for i, c in enumerate(decision.calls)
        ]
        state.messages.append(Message(role="assistant",
                                      content=decision.text[:OBSERVATION_MAX_CHARS],
                                      calls=calls or None))
        state.turn_index += 1
        state.last_error = None
        final = decision.final is not None and not calls
        self.event("model_decision", {
            "turn": state.turn_index, **usage,
            "calls": [{"call_id": c.call_id, "tool": c.tool, "args": c.args,
                       **({"raw_error": c.raw_error} if c.raw_error else {})} for c in calls],
            "final": decision.final, "text": decision.text[:2000],
            "duration_ms": round(duration_ms, 3),
        })
        failure = self.check_final_answer(decision.final) if final else None
        if final and failure is None:
            state.final = decision.final
            state.phase = "done"
        elif final:
            # The model tries again: the feedback is the next step's input.
            state.messages.append(Message(role="user", name=HARNESS_AUTHOR,
                                          content=failure.feedback))
            self.note_check_failure(failure.what)
        else:
            state.pending = calls
            state.next_call = 0
            state.phase = "tools"
        self.commit(trigger="after_model")
        if failure is not None:
            self.finish_step()

    def check_final_answer(self, final: str) -> CheckFailure | None:
        """The TaskSpec's deep checks on a final answer (tasks/validation.py)."""
        if self.spec.checks is None:
            return None
        verdict = check_final(final=final, checks=self.spec.checks, workspace=self.workspace,
                              task_id=self.task_id, goal=self.spec.goal, model=self.model,
                              timeout_s=self.turn_s)
        payload: dict[str, Any] = {"passed": verdict.failure is None}
        if verdict.review is not None:
            payload.update(self.charge(verdict.review), reviewed=True)
        if verdict.review_skipped:
            payload["review_skipped"] = verdict.review_skipped[:500]
        if verdict.failure is not None:
            payload["feedback"] = verdict.failure.feedback
        self.event("final_checked", payload)
        return verdict.failure

    def note_check_failure(self, what: str) -> None:
        self.state.checks.failures_this_step += 1
        self.state.checks.last_failure = what[:500]

    def on_model_error(self, exc: ModelError) -> None:
        self.event("model_error", {"error_class": exc.error_class, "message": str(exc)[:2000],
                                   "status": exc.status})
        raise StopRun("model_error" if exc.error_class == "permanent" else exc.error_class,
                      str(exc))

    # -- tools ---------------------------------------------------------------------------

    def run_tools(self) -> None:
        state = self.state
        while state.next_call < len(state.pending):
            call = state.pending[state.next_call]
            outcome = self.run_call(call)
            state.messages.append(Message(role="tool", content=outcome.observation,
                                          call_id=call.call_id, name=call.tool))
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
            raise StopRun("validation_failed",
                          f"{checks.failed_steps} steps in a row failed validation "
                          f"(max_retries={self.limits.max_retries}); last: {checks.last_failure}")
        self.apply_context()
        self.event("step_finished", {"step": state.step_index})
        self.commit(trigger="after_step")

    def apply_context(self) -> None:
        report = context_apply(state=self.state, policy=self.context, model=self.model,
                               timeout_s=self.turn_s)
        if report is None:
            return
        payload: dict[str, Any] = {
            "folded_messages": report.folded_messages, "kept_messages": report.kept_messages,
            "method": report.method, "new_facts": report.new_facts,
            "summary_chars": report.summary_chars,
        }
        if report.usage is not None:
            payload.update(self.charge(report.usage))
        if report.model_error:
            payload["model_error"] = report.model_error
        self.event("context_folded", payload)

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
        self.ledger = {row.call_id: row for row in ToolCall.objects.filter(
            task_id=self.task_id, step_index__gte=self.state.step_index)}

    def ledger_row(self, call: ProposedCall, tool: ToolSpec | None) -> tuple[ToolCall, bool]:
        row = self.ledger.get(call.call_id)
        if row is not None:
            if row.arguments != call.args and not row.arguments_hash:
                raise StopRun("internal_error",
                              f"call_id {call.call_id} reused with different arguments")
            return row, False
        row = ToolCall(
            task_id=self.task_id, call_id=call.call_id, tool=call.tool, arguments=call.args,
            risk=tool.risk if tool else "read", step_index=self.state.step_index,
            status=ToolCallStatus.PROPOSED,
        )
        self.ledger[call.call_id] = row
        return row, True

    def run_call(self, call: ProposedCall) -> ToolOutcome:
        try:
            tool = registry.get(call.tool) if call.tool in self.spec.tools else None
        except UnknownTool:
            tool = None
        row, is_new = self.ledger_row(call, tool)
        if not is_new:
            replay = self.replay_outcome(row)
            if replay is not None:
                return replay
        if tool is None:
            return self.refuse(row, call, error_class="invalid_call", what=(
                f"tool {call.tool!r} is not available to this task"),
                expected=f"one of: {', '.join(self.spec.tools) or '(no tools)'}",
                check="call an available tool or give a final answer")
        if call.raw_error:
            return self.refuse(row, call, error_class="invalid_arguments",
                               what=f"could not parse arguments for {tool.name}: {call.raw_error}",
                               expected=_schema_hint(tool),
                               check=f"send valid JSON arguments for {tool.name}")
        args_source = row.arguments if row.status == ToolCallStatus.APPROVED else call.args
        try:
            args = tool.args_model.model_validate(args_source)
        except ValidationError as exc:
            return self.refuse(row, call, error_class="invalid_arguments",
                               what=f"invalid arguments for {tool.name} ({_validation_summary(exc)})",
                               expected=_schema_hint(tool),
                               check=f"fix the arguments and call {tool.name} again")
        if row.status == ToolCallStatus.APPROVED:
            if canonical_hash(row.arguments) != row.arguments_hash:
                raise StopRun("internal_error",
                              f"call {call.call_id}: approved arguments changed after approval")
            return self.execute_call(row, tool, args)
        # Stricter checks before the policy gate: no human reviews a call that breaks them.
        failure = check_call(tool=tool, args=row.arguments, limits=self.limits)
        if failure is not None:
            return self.refuse(row, call, error_class="check_failed", what=failure.what,
                               expected=failure.expected, check=failure.check)
        return self.gate_and_execute(row, tool, args)

    def replay_outcome(self, row: ToolCall) -> ToolOutcome | None:
        """A call already settled in the ledger returns its stored outcome, never re-runs."""
        if row.status == ToolCallStatus.SUCCEEDED:
            self.event("tool_replayed", {"call_id": row.call_id, "tool": row.tool})
            return ToolOutcome(status=row.status, observation=_observation(row.result),
                               result=row.result)
        if row.status in (ToolCallStatus.FAILED, ToolCallStatus.TIMED_OUT,
                          ToolCallStatus.DENIED, ToolCallStatus.REJECTED):
            message = (row.result or {}).get("observation") if isinstance(row.result, dict) else None
            return ToolOutcome(status=row.status, observation=message or row.error_message,
                               error_class=row.error_class, error_message=row.error_message)
        if row.status == ToolCallStatus.RUNNING:
            return self.on_interrupted_call(row)
        return None

    def on_interrupted_call(self, row: ToolCall) -> ToolOutcome | None:
        """The ledger says this call was running when its worker stopped. An idempotent tool
        runs again with the same call_id; a non-idempotent one is never blindly re-run."""
        try:
            tool = registry.get(row.tool)
        except UnknownTool:
            tool = None
        if tool is not None and tool.idempotent:
            self.event("tool_rerun_idempotent", {"call_id": row.call_id, "tool": row.tool})
            return None
        raise StopRun("unknown_outcome",
                      f"call {row.call_id} ({row.tool}) was running when its worker stopped; "
                      "its outcome is unknown and it is not idempotent")

    def refuse(self, row: ToolCall, call: ProposedCall, *, error_class: str, what: str,
               expected: str, check: str, status: str = ToolCallStatus.FAILED) -> ToolOutcome:
        feedback = compact_feedback(what=what, expected=expected, check=check)
        self.state.budget.invalid_calls += error_class in ("invalid_arguments", "invalid_call")
        row.status = status
        row.error_class = error_class
        row.error_message = what
        row.result = {"observation": feedback}
        row.finished_at = timezone.now()
        self.event("tool_refused", {"call_id": call.call_id, "tool": call.tool,
                                    "error_class": error_class, "feedback": feedback})
        self.commit(trigger=None, extra=[row])
        return ToolOutcome(status=status, observation=feedback, error_class=error_class,
                           error_message=what)

    def gate_and_execute(self, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
        from review import policy

        decision = policy.evaluate(tool=tool, args=row.arguments, spec=self.task.spec)
        if decision.action == "deny":
            return self.refuse(
                row, ProposedCall(call_id=row.call_id, tool=row.tool, args=row.arguments),
                error_class="denied", status=ToolCallStatus.DENIED,
                what=f"{tool.name} was denied by policy: {decision.reason}",
                expected="a call the policy allows",
                check="choose a safer action or explain in the final answer why it is needed",
            )
        if decision.action == "review":
            self.pause_for_review(row, tool, args, decision)
        return self.execute_call(row, tool, args)

    def pause_for_review(self, row: ToolCall, tool: ToolSpec, args: Any, decision: Any) -> None:
        from review.services import review_request_open

        ctx = self.tool_context(row)
        preview = ""
        if tool.preview is not None:
            try:
                preview = tool.preview(ctx, args)
            except Exception as exc:  # a preview must never block the pause
                preview = f"(preview unavailable: {exc})"
        else:
            preview = json.dumps(row.arguments, indent=2, ensure_ascii=False)
        row.status = ToolCallStatus.AWAITING_REVIEW
        self.event("review_requested", {"call_id": row.call_id, "tool": tool.name,
                                        "rules": decision.rules, "reason": decision.reason})
        configured = self.config.trigger("before_review")
        checkpoint = None
        if configured is not None:
            checkpoint = checkpoint_build(
                task_id=self.task_id, seq=self.seq, state=self.state, level=configured.level,
                trigger="before_review", snapshot=self.capture_snapshot(), parent_id=self.head_id,
            )
        with transaction.atomic():
            fields = self._usage_fields()
            if checkpoint is not None:
                fields["head_checkpoint_id"] = checkpoint.id
            services.task_fence(task_id=self.task_id, epoch=self.epoch, **fields)
            if checkpoint is not None:
                checkpoint.save(force_insert=True)
            _save_ledger_row(row)
            review_request_open(tool_call=row, checkpoint_id=checkpoint.id if checkpoint else None,
                                decision=decision, preview=preview)
            services.events_record(self.pending_events)
            services.task_transition(task_id=self.task_id, to=TaskStatus.WAITING_REVIEW,
                                     expect_epoch=self.epoch, reason=f"review: {tool.name}",
                                     fields={"worker_id": ""})
        self.pending_events = []
        raise Paused()

    def tool_context(self, row: ToolCall) -> ToolContext:
        tool_timeout = self.tool_s
        return ToolContext(task_id=str(self.task_id), call_id=row.call_id,
                           workspace=self.workspace, timeout_s=tool_timeout,
                           stop=self.watchdog.stop)

    def execute_call(self, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
        timeout_s = min(tool.timeout_s, self.tool_s)
        ctx = self.tool_context(row)
        ctx.timeout_s = timeout_s
        now = timezone.now()
        row.status = ToolCallStatus.RUNNING
        row.attempts += 1
        row.started_at = now
        self.event("tool_started", {"call_id": row.call_id, "tool": tool.name,
                                    "attempt": row.attempts, "args": row.arguments})
        if tool.side_effect:
            # The intent is durable (with a checkpoint) before the side effect starts.
            trigger = ("before_external_call" if tool.risk == "external"
                       else "before_write_operation")
            self.commit(trigger=trigger, extra=[row])
        outcome = self.invoke(tool, ctx, args)
        if outcome.status == ToolCallStatus.SUCCEEDED:
            failure = check_result(tool=tool, result=outcome.result)
            if failure is not None:
                outcome = ToolOutcome(status=ToolCallStatus.FAILED, result=outcome.result,
                                      observation=failure.feedback, error_class="check_failed",
                                      error_message=failure.what)
        finished = timezone.now()
        row.status = outcome.status
        row.result = outcome.result if outcome.status == ToolCallStatus.SUCCEEDED else {
            "observation": outcome.observation,
            **({"result": outcome.result} if outcome.result is not None else {})}
        row.error_class = outcome.error_class
        row.error_message = outcome.error_message
        row.finished_at = finished
        row.duration_ms = (finished - row.started_at).total_seconds() * 1000
        row.attempt_log = [*row.attempt_log, {
            "n": row.attempts, "started_at": row.started_at.isoformat(),
            "finished_at": finished.isoformat(), "status": outcome.status,
            "error_class": outcome.error_class, "error_message": outcome.error_message[:500],
        }]
        self.event("tool_finished", {"call_id": row.call_id, "tool": tool.name,
                                     "status": outcome.status, "attempt": row.attempts,
                                     "duration_ms": round(row.duration_ms, 3),
                                     "error_class": outcome.error_class})
        self.commit(trigger=None, extra=[row])
        if outcome.error_class == "canceled":
            raise StopRun("canceled", "canceled by operator")
        return outcome

    def invoke(self, tool: ToolSpec, ctx: ToolContext, args: Any) -> ToolOutcome:
        """Run the tool in a helper thread so the timeout holds even for tools that ignore
        it; on timeout `ctx.stop` is set (cooperating tools stop, subprocesses are killed) and
        the call is abandoned: its late result is never recorded."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = tool.func(ctx, args)
            except BaseException as exc:  # handed back to the loop thread
                box["error"] = exc
            finally:
                close_old_connections()

        thread = threading.Thread(target=target, daemon=True, name=f"tool-{ctx.call_id}")
        thread.start()
        thread.join(ctx.timeout_s)
        if thread.is_alive():
            ctx.stop.set()
            thread.join(1.0)
            if not self.watchdog.cancel_requested.is_set():
                self.watchdog.stop.clear()
            message = f"{tool.name} exceeded its {ctx.timeout_s:g}s timeout (layer: tool)"
            return ToolOutcome(status=ToolCallStatus.TIMED_OUT, error_class="timeout",
                               error_message=message,
                               observation=compact_feedback(
                                   what=message, expected=f"{tool.name} to finish in time",
                                   check="use smaller inputs or a different approach"))
        if "error" in box:
            exc = box["error"]
            if isinstance(exc, ToolError):
                error_class = exc.error_class
                status = (ToolCallStatus.TIMED_OUT if error_class == "timeout"
                          else ToolCallStatus.FAILED)
                return ToolOutcome(status=status, error_class=error_class,
                                   error_message=str(exc),
                                   observation=compact_feedback(
                                       what=f"{tool.name} failed: {exc}",
                                       expected=f"{tool.name} to succeed",
                                       check="read the error and adjust the arguments"))
            log.exception("tool %s raised", tool.name, exc_info=exc)
            return ToolOutcome(status=ToolCallStatus.FAILED, error_class="tool_crashed",
                               error_message=f"{type(exc).__name__}: {exc}",
                               observation=compact_feedback(
                                   what=f"{tool.name} crashed: {type(exc).__name__}: {exc}",
                                   expected=f"{tool.name} to succeed",
                                   check="try different arguments or another tool"))
        result = box.get("result")
        if hasattr(result, "model_dump"):
            result = result.model_dump(mode="json")
        try:
            json.dumps(result)
        except (TypeError, ValueError):
            result = {"value": str(result)}
        return ToolOutcome(status=ToolCallStatus.SUCCEEDED, observation=_observation(result),
                           result=result)

    # -- endings -------------------------------------------------------------------------

    def finish_success(self) -> None:
        self.event("task_finished", {"result": (self.state.final or "")[:2000]})
        self.commit(trigger=None)
        with transaction.atomic():
            services.events_record(self.pending_events)
            services.task_transition(
                task_id=self.task_id, to=TaskStatus.SUCCEEDED, expect_epoch=self.epoch,
                reason="final answer", fields={"result": self.state.final or "",
                                               **self._usage_fields()},
            )
        self.pending_events = []

    def finish_stopped(self, stop: StopRun) -> str:
        to = TaskStatus.CANCELED if stop.error_class == "canceled" else TaskStatus.FAILED
        self.state.last_error = ErrorInfo(error_class=stop.error_class, message=stop.message[:2000],
                                          step_index=self.state.step_index)
        self.event("task_stopped", {"error_class": stop.error_class, "message": stop.message[:2000]})
        try:
            trigger = ("after_step" if stop.error_class in ("timeout", "budget_exceeded",
                                                             "validation_failed") else None)
            self.commit(trigger=trigger)
            services.task_transition(
                task_id=self.task_id, to=to, expect_epoch=self.epoch, reason=stop.message[:500],
                fields={"error_class": stop.error_class, "error_message": stop.message[:5000],
                        **self._usage_fields()},
            )
        except LeaseLost:
            return "lease_lost"
        return str(to)


def task_run(*, task_id: Any) -> str:
    """Run a queued task until it finishes, pauses or fails. A duplicate job exits untouched."""
    worker_id = worker_identity()
    task = services.task_acquire(task_id=task_id, worker_id=worker_id)
    if task is None:
        log.info("task %s is not queued; nothing to do", task_id)
        return "skipped"
    return TaskRun(task, worker_id).execute()
