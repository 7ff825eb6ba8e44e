"""OpenAI Agents SDK agents as tasks: an operator-registered `agents.Agent` (harness.yaml
`openai_agents`) run by an RQ job under the task's state machine (`agent.jobs.run_task`
dispatches here when the spec's agent kind is `openai-agents`).

The SDK runs its own loop; the harness is its approver and its ledger:

    acquire (lease epoch) -> the head checkpoint's AgentState.sdk holds the SDK's RunState
    (`RunState.to_string()`), or nothing yet (start with spec.agent.input)
    loop:
      decide the pending approvals of the RunState (`state.get_interruptions()`):
          every function tool of the agent (and of every agent it hands off to) asks for
          approval (`needs_approval` wrapped to always ask), so every turn that calls a tool
          stops at an interruption and its RunState — with the model's response — is written
          in a checkpoint (`after_model`) before any tool runs;
          a call's ledger row (ToolCall, call id `oa<branch>:<SDK call id>`) takes the
          policy's decision: the tool's own `needs_approval` -> review; our rules (harness.yaml,
          admin rules, the spec's `review.always`) -> allow / review / deny;
          review -> one ReviewRequest per call (kind openai-agents), task waiting_review, the
          job ends; the decision comes back as `RunState.approve` / `reject` (an edit: the
          tool runs with the edited arguments)
      Runner.run(agent, state): the approved tools run through the harness's wrapper (the row
      goes running -> succeeded/failed in fenced writes; a row that already succeeded replays
      its output instead of running again) until the next interruption or the final output
    end: final output -> succeeded; a guardrail tripwire -> failed (`guardrail_tripwire`);
    max turns -> budget_exceeded; any other exception of the agent -> failed (`agent_error`).

A worker killed mid-run is redispatched and resumes from the last checkpoint: the model's turn
is not asked again (its response is in the RunState), tools that finished replay from the
ledger, a tool that was running when the worker died (outcome unknown) is not run again without
a person's approval. Rollback and retry are the harness's own (checkpoints.recovery): the
workspace and the RunState go back together, calls on the new branch get new call ids.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, NoReturn

from agents import (
    Agent,
    FunctionTool,
    Handoff,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    Model,
    OpenAIChatCompletionsModel,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    RunHooks,
    Runner,
    RunState,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
)
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone
from openai import AsyncOpenAI

from agent.runtime.attempt import tool_attempt_record, tool_exception_class, tool_label_known
from agent.runtime.finish import stop_transition
from agent.runtime.run import (
    Paused,
    SessionClock,
    StopRun,
    connection_lost,
    with_lease_loaded,
)
from agent.runtime.watchdog import Watchdog
from agent.tracing import ModelCall, model_call, tool_span
from checkpoints.models import Blob, Checkpoint
from checkpoints.services import (
    NoValidCheckpoint,
    checkpoint_build,
    checkpoint_load_latest_valid,
    checkpoint_next_seq,
)
from checkpoints.snapshots import (
    snapshot_capture,
    snapshot_distrust,
    snapshot_materialise_if_missing,
)
from harness_base import telemetry
from harness_base.config import harness_config
from harness_base.metrics import STEP_SECONDS, metric_observe
from review.models import ReviewRequest, ReviewStatus
from review.policy import PolicyDecision, graph_action_policy
from review.recheck import interrupt_recheck
from review.services.transitions import review_request_open
from tasks import beacon, services
from tasks.agent_state import AgentState
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.paths import file_write
from tasks.spec import ModelEndpoint, OpenAIModelSpec, TaskSpec, model_endpoint
from tasks.states import LeaseLost, TaskStatus
from tasks.tools.mcp import tool_policy

log = logging.getLogger(__name__)

KIND = "openai-agents"
REVIEW_KIND = "openai-agents"
DECISIONS = ["approve", "edit", "reject"]
RESULT_MAX_CHARS = 5000
TEXT_MAX_CHARS = 500
# Ledger statuses whose call runs when the SDK resumes (the wrapper replays a finished one).
_RUNS = {
    ToolCallStatus.PROPOSED,
    ToolCallStatus.APPROVED,
    ToolCallStatus.RUNNING,
    ToolCallStatus.SUCCEEDED,
    ToolCallStatus.FAILED,
}
_REFUSED = {ToolCallStatus.REJECTED, ToolCallStatus.DENIED}


class AgentNotRegistered(Exception):
    pass


def agent_load(name: str) -> Agent:
    """The agent harness.yaml registers as `name`: an `agents.Agent`, or a factory (any
    callable without arguments) returning one. Only operators name code to import."""
    ref = harness_config().openai_agents.get(name)
    if ref is None:
        raise AgentNotRegistered(f"agent {name!r} is not registered in harness.yaml")
    module_name, _, attr_path = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        target = getattr(target, attr)
    if not isinstance(target, Agent) and callable(target):
        target = target()
    if not isinstance(target, Agent):
        raise AgentNotRegistered(f"{ref} is not an agents.Agent (or a factory returning one)")
    return target


def openai_agents_task_run(*, task_id: Any) -> str:
    """As agent.runtime.task_run, for a task whose spec names an OpenAI Agents SDK agent."""
    return with_lease_loaded(
        task_id=task_id,
        load=agent_load,
        name_key="name",
        run=lambda task, worker_id, loaded: AgentsRun(task, worker_id, agent=loaded).execute(),
    )


def _text(value: Any, limit: int = TEXT_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more]"


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def _arguments(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return _jsonable(text)
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {"_raw": str(text)[:2000]}
    return value if isinstance(value, dict) else {"value": value}


@dataclasses.dataclass
class Approval:
    """One pending approval of the RunState, as the harness sees it."""

    item: Any
    sdk_call_id: str
    tool: str
    arguments: dict[str, Any]
    hosted: bool  # a hosted MCP tool's approval request (not a local function tool)


def approval_of(item: Any) -> Approval:
    raw = item.raw_item
    hosted = _field(raw, "type") == "mcp_approval_request"
    name = getattr(item, "tool_name", None) or _field(raw, "name") or "tool"
    if hosted and _field(raw, "server_label"):
        name = f"{_field(raw, 'server_label')}__{_field(raw, 'name')}"
    call_id = _field(raw, "call_id") or _field(raw, "id") or name
    return Approval(
        item=item,
        sdk_call_id=str(call_id),
        tool=str(name)[:100],
        arguments=_arguments(_field(raw, "arguments")),
        hosted=hosted,
    )


class _Hooks(RunHooks):
    """The SDK's lifecycle, on the timeline: model turns and handoffs."""

    def __init__(self, run: AgentsRun) -> None:
        self.run = run
        # The model call in flight (the SDK makes one at a time): its `chat` span.
        self.chat: ModelCall | None = None

    async def on_llm_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        # The model call is promised to the worker within the turn timeout (tasks.beacon).
        beacon.expect("turn", self.run.turn_s)
        self.run.step_begin()
        self.chat = model_call(
            provider="openai", model=self.run.model_name(agent), parent=self.run.trace_parent
        )

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        beacon.progress()
        self.run.model_turn(agent, response)
        if self.chat is not None:
            usage = getattr(response, "usage", None)
            calls = any(
                _field(item, "type") not in (None, "message", "reasoning")
                for item in getattr(response, "output", None) or []
            )
            self.chat.ended(
                input_tokens=getattr(usage, "input_tokens", None),
                output_tokens=getattr(usage, "output_tokens", None),
                finish_reason="tool_calls" if calls else "stop",
            )
            self.chat = None

    def llm_failed(self, exc: BaseException) -> None:
        """The model call in flight (if any) failed: on_llm_end will not come for it."""
        if self.chat is not None:
            self.chat.failed(type(exc).__name__, str(exc))
            self.chat = None

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        self.run.step_event(
            EventType.AGENT_HANDOFF, {"from_agent": from_agent.name, "to_agent": to_agent.name}
        )


class AgentsRun:
    def __init__(self, task: Task, worker_id: str, *, agent: Agent | None = None) -> None:
        self.registered = agent
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
        # Function tools running now (the SDK may run several at once): the last to end ends
        # the promise made to the worker for them.
        self.tools_running = 0
        self.session = SessionClock(task)
        self.human_wait_s = task.human_wait_s
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        self.cancel_seen = task.cancel_requested
        self.workspace = task.workspace_path
        self.state = AgentState()
        self.head_id: Any = task.head_checkpoint_id
        self.written_head: Any = task.head_checkpoint_id
        self.seq = checkpoint_next_seq(task_id=task.id)
        self.pending_events: list[Any] = []
        self.pending_rows: dict[str, ToolCall] = {}
        self.blobs: dict[str, Blob] = {}
        self.ledger: dict[str, ToolCall] = {}
        # SDK call id -> whether the tool itself asked for approval (its own needs_approval).
        self.sdk_asked: dict[str, bool] = {}
        self.tools_of: dict[str, FunctionTool] = {}
        # The agents' MCP servers (connected for the run) and their tools' risk by tool name.
        self.mcp_servers: list[Any] = []
        self.mcp_risk: dict[str, str] = {}
        # Serialises the wrapper's writes when the SDK runs several tools at once.
        self.write_lock: asyncio.Lock | None = None
        # For the metrics: the function tools the agents' code registered (the labels a call
        # may have; an MCP server's tools are `other`) and when the step being run began.
        self.tool_names: set[str] = set()
        self.step_began: float | None = None
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )
        # The run segment's `invoke_agent` span: the parent of the spans made in the SDK's
        # event loop.
        self.trace_parent = telemetry.current_parent()
        self.run_model: Any = None

    # -- bookkeeping -------------------------------------------------------------------------

    def step_event(self, type: str, payload: dict[str, Any]) -> None:
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

    def call_id(self, sdk_call_id: str) -> str:
        return f"oa{self.sdk_branch()}:{sdk_call_id}"[:100]

    def sdk_branch(self) -> int:
        """The branch the call ids belong to: moved on by a rollback only (a retry or forward
        keeps the calls' ids, so what succeeded replays from the ledger)."""
        return int((self.state.sdk or {}).get("branch", 0))

    def checkpoint(self, *, trigger: str, level: str) -> Checkpoint:
        snapshot = snapshot_capture(
            task_id=self.task_id, workspace=self.workspace, defer=self.blobs
        )
        checkpoint = checkpoint_build(
            task_id=self.task_id,
            seq=self.seq,
            state=self.state,
            level=level,
            trigger=trigger,
            snapshot=snapshot,
            parent_id=self.head_id,
        )
        self.seq += 1
        self.head_id = checkpoint.id
        return checkpoint

    def commit(
        self,
        *,
        checkpoint: tuple[str, str] | None = None,
        rows: list[ToolCall] = (),
        fields: dict[str, Any] | None = None,
    ) -> None:
        """One fenced write: lease proof + heartbeat + usage + [a checkpoint with its new blobs]
        + the ledger rows changed since the last write + the events."""
        staged = [self.checkpoint(trigger=checkpoint[0], level=checkpoint[1])] if checkpoint else []
        update = {**self.usage(), **(fields or {})}
        if self.head_id != self.written_head:
            update["head_checkpoint_id"] = self.head_id
        changed = {row.call_id: row for row in [*self.pending_rows.values(), *rows]}
        try:
            self.cancel_seen = services.task_fenced_write(
                task_id=self.task_id,
                epoch=self.epoch,
                inserts_if_absent=list(self.blobs.values()),
                inserts=[
                    *staged,
                    *(r for r in changed.values() if r._state.adding),
                    *self.pending_events,
                ],
                updates=[(r, _LEDGER_FIELDS) for r in changed.values() if not r._state.adding],
                **update,
            )
        except BaseException:
            if self.blobs:
                snapshot_distrust(self.workspace)
            raise
        for row in changed.values():
            row._state.adding = False
        self.blobs = {}
        self.pending_events = []
        self.pending_rows = {}
        self.written_head = self.head_id

    def boundary_checks(self) -> None:
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        if self.watchdog.cancel_requested.is_set() or self.cancel_seen:
            raise StopRun("canceled", "canceled by operator")
        elapsed = self.session.elapsed_s() - self.human_wait_s
        if elapsed > self.session_s:
            self.step_event(EventType.TIMEOUT, {"layer": "session", "limit_s": self.session_s})
            raise StopRun(
                "timeout", f"session timeout: {self.session_s:g}s exceeded (layer: session)"
            )
        if self.state.budget.steps >= self.spec.budget.max_steps:
            raise StopRun("budget_exceeded", f"max_steps={self.spec.budget.max_steps} reached")

    # -- the SDK's lifecycle (hooks) ---------------------------------------------------------

    def step_begin(self) -> None:
        """A model call starts: the step before it (a model turn and the tool calls it asked
        for) has ended. The turn that answers ends no step, like the harness's own loop."""
        now = time.monotonic()
        if self.step_began is not None:
            metric_observe(STEP_SECONDS, now - self.step_began)
        self.step_began = now

    def model_name(self, agent: Any) -> str:
        """The model the SDK calls for `agent` (the run's bound model overrides the agent's)."""
        model = self.run_model or getattr(agent, "model", None)
        if model is None or isinstance(model, str):
            return model or ""
        return str(getattr(model, "model", "") or type(model).__name__)

    def model_turn(self, agent: Any, response: Any) -> None:
        self.state.budget.steps += 1
        self.state.step_index += 1
        self.state.turn_index += 1
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "input_tokens", 0) or 0)
        completion = int(getattr(usage, "output_tokens", 0) or 0)
        self.state.budget.tokens += prompt + completion
        calls, text = [], []
        for item in getattr(response, "output", None) or []:
            kind = _field(item, "type")
            if kind == "function_call":
                calls.append({"tool": _field(item, "name"), "call_id": _field(item, "call_id")})
            elif kind == "message":
                for part in _field(item, "content") or []:
                    if _field(part, "type") == "output_text":
                        text.append(_field(part, "text") or "")
            elif kind:
                calls.append({"tool": str(kind), "call_id": _field(item, "id")})
        self.step_event(
            EventType.MODEL_DECISION,
            {
                "agent": agent.name,
                "model": str(getattr(agent, "model", "") or ""),
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "calls": calls,
                **({"final": _text(" ".join(text))} if text and not calls else {}),
            },
        )

    # -- the agent, wrapped ------------------------------------------------------------------

    def harness_agent(self, root: Agent) -> Agent:
        """A copy of the agent graph (the agent and every agent it can hand off to) whose
        function tools run through the harness: they always ask for approval (the harness
        answers: its policy, or a person) and their calls go through the ledger. The operator's
        objects are not changed."""
        copies: dict[int, Agent] = {}

        def copy(agent: Agent) -> Agent:
            if id(agent) in copies:
                return copies[id(agent)]
            clone = agent.clone(tools=[self.wrap_tool(t) for t in agent.tools])
            self.tool_names.update(t.name for t in agent.tools if isinstance(t, FunctionTool))
            copies[id(agent)] = clone
            if not isinstance(agent.model, Model) and self.spec.agent.model is None:
                # No model object of its own (none, or a name): the operator's default
                # endpoint (OPENAI_BASE_URL with its bound key), never the SDK's default one.
                endpoint = model_endpoint(OpenAIModelSpec(kind="openai", model=agent.model))
                clone.model = bound_model(endpoint)
            if agent.mcp_servers:
                self.mcp_servers.extend(s for s in agent.mcp_servers if s not in self.mcp_servers)
                listed = clone.get_mcp_tools

                async def mcp_tools(run_context: Any, listed: Any = listed) -> list[Any]:
                    return [self.wrap_tool(t) for t in await listed(run_context)]

                # The MCP servers' tools go through the harness like the function tools.
                object.__setattr__(clone, "get_mcp_tools", mcp_tools)
            clone.handoffs = [handoff_copy(h) for h in agent.handoffs]
            return clone

        def handoff_copy(entry: Any) -> Any:
            if isinstance(entry, Agent):
                return copy(entry)
            target = entry._agent_ref() if isinstance(entry, Handoff) and entry._agent_ref else None
            if not isinstance(target, Agent):
                return entry
            target_copy = copy(target)
            original = entry.on_invoke_handoff

            async def invoke(context: Any, arguments: str) -> Any:
                await original(context, arguments)
                return target_copy

            return dataclasses.replace(entry, on_invoke_handoff=invoke)

        return copy(root)

    def wrap_tool(self, tool: Any) -> Any:
        if not isinstance(tool, FunctionTool):
            return tool  # hosted tools run at the provider; MCP approvals come as interruptions
        original_invoke = tool.on_invoke_tool
        original_needs = tool.needs_approval
        run = self

        async def needs_approval(context: Any, params: dict[str, Any], call_id: str) -> bool:
            asked = original_needs
            if callable(asked):
                asked = asked(context, params, call_id)
                if asyncio.iscoroutine(asked):
                    asked = await asked
            run.sdk_asked[call_id] = bool(asked)
            return True

        async def invoke(context: Any, arguments: str) -> Any:
            return await run.invoke(context, arguments, tool=tool.name, original=original_invoke)

        wrapped = dataclasses.replace(tool, on_invoke_tool=invoke, needs_approval=needs_approval)
        annotations = getattr(tool, "_mcp_annotations", None)
        if annotations is not None or getattr(tool, "_mcp_title", None) is not None:
            # An MCP server's tool: its annotations set the risk, as for the harness's MCP tools.
            dump = getattr(annotations, "model_dump", None)
            hints = dump(exclude_none=True, by_alias=True) if dump else dict(annotations or {})
            self.mcp_risk[tool.name] = tool_policy(hints)[0]
            for name in ("_mcp_annotations", "_mcp_title"):
                if hasattr(tool, name):
                    object.__setattr__(wrapped, name, getattr(tool, name))
        self.tools_of[tool.name] = wrapped
        return wrapped

    async def invoke(self, context: Any, arguments: str, *, tool: str, original: Callable) -> Any:
        """A function tool call, approved: through the ledger. A call that already finished
        replays its output; one approved with edited arguments runs with them."""
        call_id = self.call_id(str(getattr(context, "tool_call_id", "") or tool))
        row = self.ledger.get(call_id)
        if row is None:  # approved without a row: cannot happen through the harness's gate
            raise RuntimeError(f"tool call {call_id} has no ledger row")
        if row.status == ToolCallStatus.SUCCEEDED:
            self.step_event(EventType.TOOL_REPLAYED, {"call_id": call_id, "tool": tool})
            return (row.result or {}).get("output", "")
        assert self.write_lock is not None
        async with self.write_lock:
            self.boundary_checks()
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.RUNNING,
                fields={"attempts": row.attempts + 1},
                write=False,
            )
            self.step_event(
                EventType.TOOL_STARTED,
                {"call_id": call_id, "tool": tool, "arguments": row.arguments},
            )
            await sync_to_async(self.commit, thread_sensitive=True)(rows=[row])
        started = time.monotonic()
        self.tools_running += 1
        beacon.expect("tool", self.tool_s)
        with tool_span(
            tool=tool,
            call_id=call_id,
            attempt=row.attempts,
            arguments=row.arguments,
            parent=self.trace_parent,
        ) as traced:
            try:
                output = await original(context, json.dumps(row.arguments))
            except Exception as exc:
                await self.call_end(row, error=exc, started=started)
                traced.finished(
                    status=row.status,
                    error_class=row.error_class,
                    error_message=row.error_message,
                    result=None,
                )
                raise
            finally:
                self.tools_running -= 1
                if not self.tools_running:
                    beacon.progress()
            await self.call_end(row, output=output, started=started)
            traced.finished(status=row.status, error_class="", error_message="", result=output)
        return output

    async def call_end(
        self, row: ToolCall, *, started: float, output: Any = None, error: Exception | None = None
    ) -> None:
        assert self.write_lock is not None
        async with self.write_lock:
            fields: dict[str, Any] = {"duration_ms": round((time.monotonic() - started) * 1000, 3)}
            if error is None:
                fields["result"] = {"output": _jsonable(output)}
                to = ToolCallStatus.SUCCEEDED
            else:
                fields.update(error_class=type(error).__name__, error_message=str(error)[:2000])
                to = ToolCallStatus.FAILED
            services.toolcall_transition(call=row, to=to, fields=fields, write=False)
            tool_attempt_record(
                tool=tool_label_known(row.tool, self.tool_names),
                seconds=fields["duration_ms"] / 1000,
                error_class="" if error is None else tool_exception_class(error),
            )
            self.step_event(
                EventType.TOOL_FINISHED,
                {
                    "call_id": row.call_id,
                    "tool": row.tool,
                    "status": to,
                    "duration_ms": fields["duration_ms"],
                    **({"observation": _text(output)} if error is None else {}),
                    **({"error_class": fields["error_class"]} if error is not None else {}),
                },
            )
            await sync_to_async(self.commit, thread_sensitive=True)(rows=[row])

    # -- the run -----------------------------------------------------------------------------

    def run_config(self) -> RunConfig:
        """The model endpoint is bound as for the harness's own loop: a spec names an endpoint
        the operator allows (HARNESS_MODEL_ENDPOINTS) and the key bound to it stays in the
        worker's environment; it then serves every agent of the run."""
        kwargs: dict[str, Any] = {"tracing_disabled": True, "workflow_name": str(self.task_id)}
        if self.spec.agent.model is not None:
            kwargs["model"] = self.run_model = bound_model(model_endpoint(self.spec.agent.model))
        return RunConfig(**kwargs)

    def execute(self) -> str:
        self.watchdog.start()
        try:
            agent = self.harness_agent(self.registered or agent_load(self.spec.agent.name))
            self.boundary_checks()
            self.start()
            try:
                return asyncio.run(self.drive(agent))
            except Exception as exc:
                # The SDK may wrap what the harness raised inside a tool call (a cancel seen, a
                # lost lease): the harness's own exception decides how the run ends.
                raise _harness_cause(exc) from None
        except Paused:
            return "paused"
        except LeaseLost as exc:
            log.warning("task %s: %s; stopping without further writes", self.task_id, exc)
            return "lease_lost"
        except StopRun as stop:
            return self.finish_stopped(stop)
        except (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered) as exc:
            result = exc.guardrail_result
            name = result.guardrail.get_name()
            which = "input" if isinstance(exc, InputGuardrailTripwireTriggered) else "output"
            info = _text(_jsonable(result.output.output_info))
            self.step_event(
                EventType.GUARDRAIL_TRIPPED, {"guardrail": name, "kind": which, "info": info}
            )
            return self.finish_stopped(
                StopRun(
                    "guardrail_tripwire", f"{which} guardrail {name!r} tripped its wire: {info}"
                )
            )
        except (ToolInputGuardrailTripwireTriggered, ToolOutputGuardrailTripwireTriggered) as exc:
            name = exc.guardrail.get_name()
            which = (
                "tool input"
                if isinstance(exc, ToolInputGuardrailTripwireTriggered)
                else "tool output"
            )
            info = _text(_jsonable(exc.output.output_info))
            self.step_event(
                EventType.GUARDRAIL_TRIPPED, {"guardrail": name, "kind": which, "info": info}
            )
            return self.finish_stopped(
                StopRun(
                    "guardrail_tripwire", f"{which} guardrail {name!r} tripped its wire: {info}"
                )
            )
        except MaxTurnsExceeded as exc:
            return self.finish_stopped(StopRun("budget_exceeded", str(exc)[:500]))
        except (AgentNotRegistered, ImportError, AttributeError) as exc:
            if self.registered is not None:
                log.exception("task %s: agent failed", self.task_id)
                return self.finish_stopped(StopRun("agent_error", f"{type(exc).__name__}: {exc}"))
            return self.finish_stopped(StopRun("agent_not_registered", str(exc)))
        except Exception as exc:  # the agent's own error: the task fails, its state is kept
            if connection_lost(exc):
                raise  # not the task's failure: with_lease gives the task back
            log.exception("task %s: agent failed", self.task_id)
            return self.finish_stopped(StopRun("agent_error", f"{type(exc).__name__}: {exc}"))
        finally:
            self.watchdog.finish()

    def start(self) -> None:
        """A new task: its workspace files and the task_start checkpoint. Otherwise resume the
        head checkpoint (verified): the workspace brought in line with it, the ledger loaded."""
        try:
            loaded = checkpoint_load_latest_valid(
                task_id=self.task_id, head_id=self.head_id, epoch=self.epoch
            )
        except NoValidCheckpoint as exc:
            raise StopRun("checkpoint_corrupted", str(exc)) from None
        self.workspace.mkdir(parents=True, exist_ok=True)
        if loaded is None:
            for rel, content in self.spec.workspace.files.items():
                file_write(self.workspace, rel, content.encode())
            self.state.sdk = {"kind": KIND, "agent": self.spec.agent.name, "run_state": None}
            self.step_event(EventType.TASK_STARTED, {"worker": self.worker_id, "epoch": self.epoch})
            self.commit(checkpoint=("task_start", "task"))
            return
        self.state = loaded.state
        if loaded.checkpoint.id != self.head_id:
            self.step_event(
                EventType.CHECKPOINT_FALLBACK,
                {"checkpoint_id": str(loaded.checkpoint.id), "seq": loaded.checkpoint.seq},
            )
            self.head_id = loaded.checkpoint.id
        recovery = self.state.recovery
        if snapshot_materialise_if_missing(
            workspace=self.workspace, manifest=loaded.snapshot, sync=recovery is not None
        ):
            self.step_event(
                EventType.WORKSPACE_MATERIALISED, {"checkpoint_id": str(loaded.checkpoint.id)}
            )
        if recovery is not None and recovery.kind == "rollback":
            # The calls after the checkpoint were undone: the SDK's pending calls run again
            # under new call ids (the rollback's branch).
            self.state.sdk = {**(self.state.sdk or {}), "branch": self.state.branch}
        if recovery is not None:
            self.step_event(
                EventType.CONTEXT_ALIGNED,
                {"kind": recovery.kind, "reason": recovery.reason, "undone": recovery.undone},
            )
            self.state.recovery = None
            self.state.last_error = None
        self.ledger = {
            row.call_id: row
            for row in ToolCall.objects.filter(
                task_id=self.task_id, call_id__startswith=f"oa{self.sdk_branch()}:"
            )
        }
        self.step_event(
            EventType.RESUMED,
            {
                "worker": self.worker_id,
                "epoch": self.epoch,
                "checkpoint_id": str(loaded.checkpoint.id),
                "seq": loaded.checkpoint.seq,
            },
        )

    async def drive(self, agent: Agent) -> str:
        connected = []
        try:
            for server in self.mcp_servers:
                await server.connect()
                connected.append(server)
            return await self.turns(agent)
        finally:
            for server in reversed(connected):
                try:
                    await server.cleanup()
                except Exception:
                    log.warning("task %s: closing MCP server %s failed", self.task_id, server)
            # The writes made from the SDK's loop use the executor thread's connection.
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    async def turns(self, agent: Agent) -> str:
        self.write_lock = asyncio.Lock()
        run_config = self.run_config()
        hooks = _Hooks(self)
        context = {"harness_workspace": str(self.workspace), "harness_task_id": str(self.task_id)}
        serialized = (self.state.sdk or {}).get("run_state")
        if serialized:
            state: Any = await RunState.from_string(agent, serialized, context_override=context)
            # The step paused for its calls' reviews goes on: they run before the next turn.
            self.step_began = time.monotonic()
        else:
            state = None
        while True:
            if state is not None:
                await sync_to_async(self.decide, thread_sensitive=True)(state)
            await sync_to_async(self.boundary_checks, thread_sensitive=True)()
            try:
                result = await Runner.run(
                    agent,
                    state if state is not None else self.first_input(),
                    context=context,
                    max_turns=self.spec.budget.max_steps,
                    hooks=hooks,
                    run_config=run_config,
                )
            except BaseException as exc:
                hooks.llm_failed(exc)
                raise
            state = result.to_state()
            self.state.sdk = {
                "kind": KIND,
                "agent": self.spec.agent.name,
                "branch": self.sdk_branch(),
                "run_state": state.to_string(),
                "current_agent": result.last_agent.name,
            }
            if not result.interruptions:
                return await sync_to_async(self.finish, thread_sensitive=True)(result)
            # The model's response and its pending calls, before any of them runs.
            await sync_to_async(self.commit, thread_sensitive=True)(
                checkpoint=("after_model", "step")
            )

    def first_input(self) -> Any:
        given = self.spec.agent.input
        return given if given else self.spec.goal

    # -- approvals: the harness's gate -------------------------------------------------------

    def decide(self, state: Any) -> None:
        """Answer every pending approval of the RunState from the ledger, creating the rows of
        new calls with the policy's decision. Pauses (ends the job) while any needs a person."""
        waiting: list[tuple[ToolCall, PolicyDecision, str]] = []
        unknown: list[ToolCall] = []
        for item in state.get_interruptions():
            approval = approval_of(item)
            call_id = self.call_id(approval.sdk_call_id)
            row = self.ledger.get(call_id)
            if row is None:
                row, decision, why = self.new_call(approval, call_id)
                if row.status == ToolCallStatus.AWAITING_REVIEW:
                    waiting.append((row, decision, why))
                    continue
            if row.status == ToolCallStatus.RUNNING and row.call_id not in self.pending_rows:
                unknown.append(row)  # the worker died while it ran: its outcome is unknown
            elif row.status == ToolCallStatus.AWAITING_REVIEW:
                waiting.append((row, PolicyDecision(action="review"), ""))
            elif row.status in _REFUSED:
                state.reject(item, rejection_message=self.refusal_text(row))
            elif row.status in _RUNS:
                state.approve(item)
                if approval.hosted and row.status != ToolCallStatus.SUCCEEDED:
                    self.hosted_delivered(row)
            else:  # unknown_outcome and the like: a person settles it first
                waiting.append((row, PolicyDecision(action="review"), ""))
        if unknown:
            self.ask_about_unknown(unknown)
        if waiting:
            self.pause_for_reviews(waiting)
        self.recheck_approvals(state)
        if self.pending_rows:
            self.commit()

    def recheck_approvals(self, state: Any) -> None:
        """Just before the SDK is resumed with them, a person's approvals are checked again
        (review.recheck.interrupt_recheck: deadline, approvers, rules). One that no longer
        holds is not delivered: a new pending review of the call says what changed, and the
        task waits for it."""
        rows = {
            self.ledger[call_id].pk: self.ledger[call_id]
            for call_id in (
                self.call_id(approval_of(item).sdk_call_id) for item in state.get_interruptions()
            )
            if call_id in self.ledger and self.ledger[call_id].status == ToolCallStatus.APPROVED
        }
        if not rows:
            return
        now = timezone.now()
        drifted = [
            (review, check)
            for review in ReviewRequest.objects.filter(
                tool_call_id__in=list(rows),
                status=ReviewStatus.APPROVED,
                reopened_as__isnull=True,
            )
            for check in [interrupt_recheck(review=review, task=self.task, now=now)]
            if not check.holds
        ]
        if not drifted:
            return
        for review, check in drifted:
            row = rows[review.tool_call_id]
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
            self.pending_rows[row.call_id] = row
            self.step_event(
                EventType.REVIEW_REQUESTED,
                {
                    "call_id": row.call_id,
                    "tool": row.tool,
                    "reopened_from": review.id,
                    "changes": check.changes,
                },
            )
        with transaction.atomic():
            self.commit(checkpoint=("before_review", "tool"))
            for review, check in drifted:
                review_request_open(
                    tool_call=rows[review.tool_call_id],
                    checkpoint_id=self.head_id,
                    decision=check.policy,
                    preview=review.preview,
                    kind=REVIEW_KIND,
                    interrupt={
                        k: v for k, v in (review.interrupt or {}).items() if k != "decision"
                    },
                    reopened_from=review,
                    changes=check.changes,
                )
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.WAITING_REVIEW,
                expect_epoch=self.epoch,
                reason=f"approval no longer holds: {drifted[0][0].tool}"[:500],
                fields={"worker_id": ""},
            )
        raise Paused()

    def hosted_delivered(self, row: ToolCall) -> None:
        """A hosted MCP call runs at the provider once approved: the approval delivered to the
        SDK is as far as the harness sees it."""
        services.toolcall_transition(
            call=row, to=ToolCallStatus.RUNNING, fields={"attempts": row.attempts + 1}, write=False
        )
        services.toolcall_transition(
            call=row,
            to=ToolCallStatus.SUCCEEDED,
            fields={"result": {"output": "approved; the hosted MCP server runs it"}},
            write=False,
        )
        self.pending_rows[row.call_id] = row

    def new_call(self, approval: Approval, call_id: str) -> tuple[ToolCall, PolicyDecision, str]:
        row = ToolCall(
            task_id=self.task_id,
            call_id=call_id,
            tool=approval.tool,
            arguments=approval.arguments,
            arguments_hash=canonical_hash(approval.arguments),
            risk=self.mcp_risk.get(approval.tool) or ("mcp" if approval.hosted else "agent"),
            step_index=self.state.step_index,
        )
        self.ledger[call_id] = row
        self.pending_rows[call_id] = row
        decision, why = self.policy(approval)
        if decision.action == "deny":
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.DENIED,
                fields={"error_class": "denied", "error_message": decision.reason[:2000]},
                write=False,
            )
            self.step_event(
                EventType.TOOL_REFUSED,
                {"call_id": call_id, "tool": row.tool, "reason": decision.reason},
            )
        elif decision.action == "review":
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
        return row, decision, why

    def policy(self, approval: Approval) -> tuple[PolicyDecision, str]:
        """The tool's own `needs_approval` (and a hosted MCP tool's approval request) always
        pauses; the harness's rules decide the other calls."""
        risk = self.mcp_risk.get(approval.tool, "graph")
        decision = graph_action_policy(tool_name=approval.tool, args=approval.arguments, risk=risk)
        always = set((self.spec.review.always if self.spec.review else None) or [])
        asked = approval.hosted or self.sdk_asked.get(approval.sdk_call_id, False)
        if decision.action == "deny":
            return decision, decision.reason
        if asked:
            why = "the tool asks for approval (needs_approval)"
            if approval.hosted:
                why = "the hosted MCP tool asks for approval"
            return dataclasses.replace(
                decision, action="review", reason=decision.reason or why
            ), why
        if approval.tool in always:
            why = f"this task asks for review of every {approval.tool} call"
            return dataclasses.replace(decision, action="review", reason=why), why
        return decision, decision.reason

    @staticmethod
    def refusal_text(row: ToolCall) -> str:
        observation = (row.result or {}).get("observation")
        if observation:
            return str(observation)
        return f"The call of {row.tool} was not run: {row.error_message or row.status}."

    def ask_about_unknown(self, rows: list[ToolCall]) -> NoReturn:
        """Calls that were running when a worker died: their effect may or may not have
        happened. Never run again unasked: a person approves running them again, or rejects."""
        waiting = []
        for row in rows:
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.UNKNOWN_OUTCOME,
                fields={
                    "error_class": "unknown_outcome",
                    "error_message": "the worker stopped while the call ran; approve to run it "
                    "again, reject if it took effect",
                },
                write=False,
            )
            self.pending_rows[row.call_id] = row
            self.step_event(
                EventType.TOOL_UNKNOWN_OUTCOME, {"call_id": row.call_id, "tool": row.tool}
            )
            waiting.append((row, PolicyDecision(action="review"), "outcome unknown"))
        self.pause_for_reviews(waiting)

    def pause_for_reviews(self, waiting: list[tuple[ToolCall, PolicyDecision, str]]) -> NoReturn:
        pending = [
            row
            for row, _d, _w in waiting
            if ReviewRequest.objects.filter(
                tool_call__task_id=self.task_id,
                tool_call__call_id=row.call_id,
                status=ReviewStatus.PENDING,
            ).exists()
        ]
        fresh = [(r, d, w) for r, d, w in waiting if r not in pending]
        for row, _decision, why in fresh:
            self.step_event(
                EventType.REVIEW_REQUESTED, {"call_id": row.call_id, "tool": row.tool, "why": why}
            )
        with transaction.atomic():
            self.commit(checkpoint=("before_review", "tool"), rows=[r for r, _d, _w in fresh])
            for row, decision, why in fresh:
                review_request_open(
                    tool_call=row,
                    checkpoint_id=self.head_id,
                    decision=_as_review(decision, why),
                    preview=json.dumps(row.arguments, indent=2, ensure_ascii=False, default=str),
                    kind=REVIEW_KIND,
                    interrupt={"mode": "per_call", "allowed": DECISIONS, "adapter": KIND},
                )
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.WAITING_REVIEW,
                expect_epoch=self.epoch,
                reason=f"approval needed: {waiting[0][0].tool}"[:500],
                fields={"worker_id": ""},
            )
        raise Paused()

    # -- the end -----------------------------------------------------------------------------

    def finish(self, result: Any) -> str:
        output = result.final_output
        text = output if isinstance(output, str) else json.dumps(_jsonable(output))
        text = _text(text, RESULT_MAX_CHARS)
        self.state.final = text
        self.state.phase = "done"
        self.step_event(
            EventType.TASK_FINISHED, {"result": text[:2000], "agent": result.last_agent.name}
        )
        with transaction.atomic():
            self.commit(checkpoint=("after_step", "step"))
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.SUCCEEDED,
                expect_epoch=self.epoch,
                reason="agent finished",
                fields={"result": text, **self.usage()},
            )
        return "succeeded"

    def finish_stopped(self, stop: StopRun) -> str:
        self.step_event(
            EventType.TASK_STOPPED,
            {"error_class": stop.error_class, "message": stop.message[:2000]},
        )
        try:
            with transaction.atomic():
                self.commit()
                to = stop_transition(
                    task_id=self.task_id, epoch=self.epoch, stop=stop, usage=self.usage()
                )
        except LeaseLost:
            return "lease_lost"
        return str(to)


def bound_model(endpoint: ModelEndpoint) -> OpenAIChatCompletionsModel:
    """The SDK's chat-completions model for an endpoint the operator configured, with the key
    bound to it (a keyless endpoint gets a placeholder, never another endpoint's key)."""
    key = os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=key or "no-key")
    return OpenAIChatCompletionsModel(model=endpoint.model, openai_client=client)


def _harness_cause(exc: BaseException) -> BaseException:
    """The first StopRun, LeaseLost or Paused in the exception's chain, else the exception."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (StopRun, LeaseLost, Paused)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return exc


_LEDGER_FIELDS = [
    "arguments",
    "arguments_hash",
    "status",
    "result",
    "error_class",
    "error_message",
    "attempts",
    "started_at",
    "finished_at",
    "duration_ms",
]


def _as_review(decision: PolicyDecision, why: str) -> PolicyDecision:
    return dataclasses.replace(decision, action="review", reason=(decision.reason or why)[:200])
