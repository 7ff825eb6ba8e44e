"""Pydantic AI agents as tasks: an operator-registered `pydantic_ai.Agent` (harness.yaml
`pydantic_ai_agents`) run by an RQ job under the task's state machine (`agent.jobs.run_task`
dispatches here when the spec's agent kind is `pydantic-ai`).

    acquire (lease epoch) -> the head checkpoint (the harness's own, verified):
        none yet                    -> start with spec.agent.input as the user prompt
        approvals asked, all decided-> DeferredToolResults: ToolApproved(override_args=...) /
                                       ToolDenied(message) by the reviewers' decisions
        approvals asked, pending    -> pause again
        otherwise                   -> continue from the message history (a retry, resume,
                                       redispatch after a crash, kill -9, a rollback)
    Agent.iter node by node: each model response is a checkpoint (`after_model`: the message
    history, ModelMessagesTypeAdapter JSON, + a workspace snapshot), each finished tools node
    closes a step (`after_step`); between nodes: lease, cancel, session timeout, step budget.
    Every tool call goes through HarnessTools.wrap_tool_execute: a ledger row (call_id =
    `<gen>.<step>.<tool_call_id>`) written `running` before the tool runs and settled right
    after, so a crash never runs an executed tool again (its stored result is replayed); our
    review rules decide the call (deny -> the model is told; review -> ApprovalRequired).
    end: DeferredToolRequests -> one review per approval (kind `pydantic-ai`), waiting_review,
         the job ends; any other output -> succeeded; an exception -> failed.

The database connection belongs to the job's thread: the agent runs under asgiref's
async_to_sync and every database write goes back to that thread (sync_to_async).
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
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from openai import AsyncOpenAI
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.agent import CallToolsNode, ModelRequestNode
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ModelConnectionError,
    ModelRateLimitError,
    ModelRequestTimeout,
    ModelRetry,
    ModelServerError,
    ModelUnavailableError,
)
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolApproved
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits
from pydantic_core import to_jsonable_python
from pydantic_graph import End

from agent.retry import TRANSIENT, retry_policy
from agent.runtime.attempt import (
    TOOL_STOP_GRACE_S,
    tool_attempt_record,
    tool_exception_class,
    tool_label_known,
)
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
from checkpoints.services import (
    NoValidCheckpoint,
    checkpoint_build,
    checkpoint_load_latest_valid,
    checkpoint_next_seq,
)
from checkpoints.snapshots import snapshot_capture, snapshot_materialise_if_missing
from harness_base import telemetry
from harness_base.config import harness_config
from harness_base.metrics import STEP_SECONDS, metric_observe
from review.models import ReviewRequest, ReviewStatus
from review.policy import agent_tool_policy, interrupt_policy
from review.recheck import interrupt_recheck
from review.services.gates import review_gate_unknown_outcome
from review.services.transitions import review_request_open
from tasks import beacon, services
from tasks.agent_state import AgentState, ErrorInfo
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.paths import file_write
from tasks.spec import OpenAIModelSpec, TaskSpec, model_endpoint
from tasks.states import LeaseLost, TaskStatus

log = logging.getLogger(__name__)

KIND = "pydantic-ai"
REVIEW_KIND = "pydantic-ai"
# The decisions a reviewer may give a Pydantic AI approval: ToolApproved, ToolApproved with
# override_args, ToolDenied.
DECISIONS = ["approve", "edit", "reject"]
# A tool's risk when its metadata names none (no risk rule matches it; tool rules do).
DEFAULT_RISK = "agent"
RESULT_MAX_CHARS = 5000
# Model errors the harness's retry policy retries (harness.yaml `retry`, the spec's `retry`):
# the task waits in retry_wait and resumes from its last checkpoint; no worker sleeps.
TRANSIENT_MODEL_ERRORS = (
    ModelRateLimitError,
    ModelUnavailableError,
    ModelServerError,
    ModelConnectionError,
    ModelRequestTimeout,
)
TEXT_MAX_CHARS = 2000


class AgentNotRegistered(Exception):
    pass


def agent_load(name: str) -> Any:
    """The agent harness.yaml registers as `name`: a pydantic_ai Agent, or a factory (called
    with no arguments) that returns one. Only operators name code to import."""
    ref = harness_config().pydantic_ai_agents.get(name)
    if ref is None:
        raise AgentNotRegistered(f"Pydantic AI agent {name!r} is not registered in harness.yaml")
    module_name, _, attr_path = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        target = getattr(target, attr)
    if not isinstance(target, Agent) and callable(target):
        target = target()
    if not isinstance(target, Agent):
        raise AgentNotRegistered(f"{ref} is not a pydantic_ai.Agent (or a factory of one)")
    return target


def agent_model(spec_model: OpenAIModelSpec | None, agent: Any) -> Any:
    """The model the agent runs with, bound as for the harness's own loop: a spec's model is
    an OpenAI-compatible endpoint the operator allowed, with the key bound to it
    (tasks.spec.model_endpoint; a key never comes from a spec). None: the agent's own model.
    An agent without a model gets HARNESS_MODEL at OPENAI_BASE_URL."""
    if spec_model is None and agent.model is not None:
        return None
    endpoint = model_endpoint(spec_model or OpenAIModelSpec(kind="openai"))
    key = os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
    # No retries inside the client: transient errors go through the harness's retry policy.
    # A keyless endpoint gets a placeholder (the client would read OPENAI_API_KEY otherwise).
    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=key or "no-key", max_retries=0)
    return OpenAIChatModel(endpoint.model, provider=OpenAIProvider(openai_client=client))


def _model_names(model: Any) -> dict[str, Any]:
    """`gen_ai.provider.name` and the request's model of a model (or "provider:model")."""
    if isinstance(model, str):
        provider, _, name = model.rpartition(":")
        return {"provider": provider or None, "model": name}
    return {
        "provider": getattr(model, "system", None),
        "model": str(getattr(model, "model_name", "") or ""),
    }


def _chat_ended(chat: ModelCall, node: Any) -> None:
    response = getattr(node, "model_response", None)
    if response is None:
        chat.ended(input_tokens=None, output_tokens=None, finish_reason="stop")
        return
    chat.ended(
        input_tokens=response.usage.input_tokens,
        output_tokens=response.usage.output_tokens,
        finish_reason=response.finish_reason or ("tool_call" if response.tool_calls else "stop"),
        response_model=response.model_name,
    )


def pydantic_ai_task_run(*, task_id: Any) -> str:
    """As agent.runtime.task_run, for a task whose spec names a Pydantic AI agent."""
    return with_lease_loaded(
        task_id=task_id,
        load=agent_load,
        name_key="name",
        run=lambda task, worker_id, loaded: PydanticAIRun(task, worker_id, agent=loaded).execute(),
    )


def messages_dump(messages: list[Any]) -> list[Any]:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def messages_load(data: list[Any]) -> list[Any]:
    return ModelMessagesTypeAdapter.validate_python(data)


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(to_jsonable_python(value), ensure_ascii=False))
    except Exception:  # anything a tool returns: kept as its text
        return str(value)


def _text(value: Any, limit: int = TEXT_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more]"


@dataclass(frozen=True)
class TaskDeps:
    """What an agent's tools get as `ctx.deps` when its `deps_type` is TaskDeps: the task's
    workspace (tools write there, relative paths only: tasks.paths.file_write) and id."""

    workspace: Path
    task_id: str


def _ours(group: BaseExceptionGroup) -> BaseException:
    """The harness's own exception inside a group (a pause, a lost lease, a stop, an
    escalation), else the first one."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if isinstance(exc, Paused | LeaseLost | StopRun | Escalate):
            return exc
    return leaves[0] if leaves else group


@dataclass
class Plan:
    """What the tool hook does with one call (decided in the job's thread)."""

    action: str  # run | replay | refuse | retry | approval
    value: Any = None
    row: ToolCall | None = None


class Escalate(Exception):
    """A call's worker died while it ran and its outcome is unknown: a human decides."""

    def __init__(self, row: ToolCall) -> None:
        super().__init__(row.call_id)
        self.row = row


@dataclass(init=False)
class HarnessTools(AbstractCapability):
    """Every tool call of the agent through the harness: ledger, policy, replay."""

    def __init__(self, run: PydanticAIRun) -> None:
        self.run = run

    async def wrap_tool_execute(self, ctx, *, call, tool_def, args, handler):  # type: ignore[override]
        plan = await sync_to_async(self.run.tool_begin)(
            call=call, tool_def=tool_def, args=args, approved=ctx.tool_call_approved
        )
        if plan.action == "replay" or plan.action == "refuse":
            return plan.value
        if plan.action == "retry":
            raise ModelRetry(plan.value)
        if plan.action == "approval":
            raise ApprovalRequired(metadata={"harness": plan.value})
        row, raised = plan.row, None
        with tool_span(
            tool=row.tool,
            call_id=row.call_id,
            attempt=row.attempts,
            arguments=row.arguments,
            parent=self.run.trace_parent,
        ) as traced:
            try:
                result = await handler(args)
            except (ApprovalRequired, CallDeferred) as exc:
                # The tool itself asked (ApprovalRequired raised before it acted): reviewed.
                await sync_to_async(self.run.tool_deferred)(row=row)
                raised = exc
            except BaseException as exc:
                await sync_to_async(self.run.tool_end)(row=row, error=exc)
                raised = exc
            else:
                await sync_to_async(self.run.tool_end)(row=row, result=result)
            traced.finished(
                status=row.status,
                error_class=row.error_class if raised is not None else "",
                error_message=row.error_message if raised is not None else "",
                result=None if raised is not None else result,
            )
        if raised is not None:  # raised here: the span's status is the row's, not the raise's
            raise raised
        return result


class PydanticAIRun:
    def __init__(self, task: Task, worker_id: str, *, agent: Any = None) -> None:
        self.agent = agent
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
        self.session = SessionClock(task)
        self.human_wait_s = task.human_wait_s
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        self.cancel_seen = task.cancel_requested
        self.workspace = task.workspace_path
        self.state = AgentState()
        self.head_id: Any = task.head_checkpoint_id
        self.seq = checkpoint_next_seq(task_id=task.id)
        self.pending_events: list[Any] = []
        # call_id -> this task's ledger row (loaded when the run starts).
        self.ledger: dict[str, ToolCall] = {}
        # A retry re-runs the calls that failed (others replay).
        self.rerun_failed = False
        # For the metrics: the function tools the agent's code registered (the labels a call
        # may have; an MCP server's tools are `other`) and when the step being run began.
        self.tool_names: frozenset[str] = frozenset()
        self.step_began = time.monotonic()
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )
        # The run segment's `invoke_agent` span: the parent of the spans made in the agent's
        # event loop (another thread).
        self.trace_parent = telemetry.current_parent()

    # -- bookkeeping -------------------------------------------------------------------------

    @property
    def sdk(self) -> dict[str, Any]:
        return self.state.sdk  # type: ignore[return-value]

    def event(self, type: str, payload: dict[str, Any]) -> None:
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
            configured = self.config.trigger(trigger)
            checkpoint = checkpoint_build(
                task_id=self.task_id,
                seq=self.seq,
                state=self.state,
                level=configured.level if configured else "step",
                trigger=trigger,
                snapshot=snapshot_capture(task_id=self.task_id, workspace=self.workspace),
                parent_id=self.head_id,
            )
            self.seq += 1
            self.head_id = checkpoint.id
            update["head_checkpoint_id"] = checkpoint.id
        with transaction.atomic() if then is not None else nullcontext():
            self.cancel_seen = services.task_fenced_write(
                task_id=self.task_id,
                epoch=self.epoch,
                inserts=[*([checkpoint] if checkpoint else []), *inserts, *self.pending_events],
                updates=list(updates),
                **update,
            )
            self.pending_events = []
            if then is not None:
                then(checkpoint)
        return checkpoint

    def boundary_checks(self, *, model_next: bool) -> None:
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        if self.watchdog.cancel_requested.is_set() or self.cancel_seen:
            raise StopRun("canceled", "canceled by operator")
        elapsed = self.session.elapsed_s() - self.human_wait_s
        if elapsed > self.session_s:
            self.event(EventType.TIMEOUT, {"layer": "session", "limit_s": self.session_s})
            raise StopRun(
                "timeout", f"session timeout: {self.session_s:g}s exceeded (layer: session)"
            )
        budget = self.spec.budget
        if model_next and self.state.budget.steps >= budget.max_steps:
            raise StopRun("budget_exceeded", f"max_steps={budget.max_steps} reached")
        if self.state.budget.tokens > budget.max_tokens:
            raise StopRun(
                "budget_exceeded",
                f"max_tokens={budget.max_tokens} exceeded ({self.state.budget.tokens})",
            )

    # -- the run -----------------------------------------------------------------------------

    def execute(self) -> str:
        self.watchdog.start()
        try:
            agent = self.agent or agent_load(self.spec.agent.name)
            self.tool_names = frozenset(
                name
                for toolset in agent.toolsets
                if isinstance(toolset, FunctionToolset)
                for name in toolset.tools
            )
            try:
                model = agent_model(self.spec.agent.model, agent)
            except ValueError as exc:
                raise StopRun("model_endpoint", str(exc)) from None
            prompt, results = self.start_or_resume()
            try:
                output, messages = async_to_sync(self.drive)(agent, model, prompt, results)
            except BaseExceptionGroup as group:  # raised inside a tool's task group
                raise _ours(group) from None
            finally:
                beacon.claim()  # the job's thread runs the task again
            if isinstance(output, DeferredToolRequests):
                self.pause_for_approvals(output, messages)
            return self.finish(output, messages)
        except Paused:
            return "paused"
        except LeaseLost as exc:
            log.warning("task %s: %s; stopping without further writes", self.task_id, exc)
            return "lease_lost"
        except StopRun as stop:
            return self.finish_stopped(stop)
        except Escalate as exc:
            return self.escalate(exc.row)
        except TRANSIENT_MODEL_ERRORS as exc:
            return self.retry_model(exc)
        except AgentNotRegistered as exc:
            return self.finish_stopped(StopRun("agent_not_registered", str(exc)))
        except Exception as exc:  # the agent's own error: the task fails, its state is kept
            if connection_lost(exc):
                raise  # not the task's failure: with_lease gives the task back
            log.exception("task %s: Pydantic AI agent failed", self.task_id)
            return self.finish_stopped(StopRun("agent_error", f"{type(exc).__name__}: {exc}"))
        finally:
            self.watchdog.finish()

    def start_or_resume(self) -> tuple[Any, DeferredToolResults | None]:
        """-> (the first user prompt or None, the reviewers' decisions or None)."""
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
            self.state = AgentState(sdk={"kind": KIND, "gen": 0, "messages": [], "deferred": []})
            self.event(EventType.TASK_STARTED, {"worker": self.worker_id, "epoch": self.epoch})
            self.commit(trigger="task_start")
            return self.first_prompt(), None
        self.state = loaded.state
        if self.state.sdk is None or self.state.sdk.get("kind") != KIND:
            raise StopRun("checkpoint_corrupted", "the head checkpoint holds no Pydantic AI state")
        if loaded.checkpoint.id != self.head_id:
            self.event(
                EventType.CHECKPOINT_FALLBACK,
                {"checkpoint_id": str(loaded.checkpoint.id), "seq": loaded.checkpoint.seq},
            )
            self.head_id = loaded.checkpoint.id
        self.ledger = {row.call_id: row for row in ToolCall.objects.filter(task_id=self.task_id)}
        recovery = self.state.recovery
        if snapshot_materialise_if_missing(
            workspace=self.workspace, manifest=loaded.snapshot, sync=recovery is not None
        ):
            self.event(
                EventType.WORKSPACE_MATERIALISED, {"checkpoint_id": str(loaded.checkpoint.id)}
            )
        if recovery is not None:
            if recovery.kind == "rollback":
                # Calls on the new branch get new ids: nothing of the undone branch replays.
                self.sdk["gen"] = self.state.branch
            self.rerun_failed = recovery.kind == "retry"
            self.event(
                EventType.CONTEXT_ALIGNED,
                {
                    "kind": recovery.kind,
                    "reason": recovery.reason,
                    "actor": recovery.actor,
                    "from_seq": recovery.from_seq,
                    "messages": len(self.sdk["messages"]),
                },
            )
            self.state.recovery = None
        self.event(
            EventType.RESUMED,
            {
                "worker": self.worker_id,
                "epoch": self.epoch,
                "checkpoint_id": str(loaded.checkpoint.id),
                "seq": loaded.checkpoint.seq,
                "messages": len(self.sdk["messages"]),
            },
        )
        results = self.decisions() if self.sdk.get("deferred") else None
        if not self.sdk["messages"]:  # stopped before the first model turn
            return self.first_prompt(), None
        return None, results

    def first_prompt(self) -> str:
        """The spec's input (JSON as its text); empty: the task's goal."""
        prompt = self.spec.agent.input
        if prompt == "":
            return self.spec.goal
        return prompt if isinstance(prompt, str) else json.dumps(prompt)

    async def drive(
        self, agent: Any, model: Any, prompt: Any, results: DeferredToolResults | None
    ) -> tuple[Any, list[Any]]:
        """Agent.iter node by node; after each node, its bookkeeping in the job's thread."""
        history = messages_load(self.sdk["messages"]) or None
        output_type = agent.output_type
        output_types = list(output_type) if isinstance(output_type, list | tuple) else [output_type]
        if DeferredToolRequests not in output_types:
            output_types.append(DeferredToolRequests)
        async with agent.iter(
            prompt,
            message_history=history,
            deferred_tool_results=results,
            output_type=output_types,
            model=model,
            deps=self.deps(agent),
            capabilities=[HarnessTools(self)],
            # The task's budget (max_steps, max_tokens) bounds the run, checked between nodes;
            # Pydantic AI's own default of 50 requests per run would end a long task early.
            usage_limits=UsageLimits(request_limit=None),
        ) as run:
            # This event loop's thread runs the task from here (tasks.beacon): each node is
            # promised to the worker within its timeout, the model's or the tools'.
            beacon.claim()
            node = run.next_node
            while not isinstance(node, End):
                ran = node
                if isinstance(ran, ModelRequestNode):
                    beacon.expect("turn", self.turn_s)
                    chat = model_call(
                        **_model_names(model or agent.model), parent=self.trace_parent
                    )
                    try:
                        node = await asyncio.wait_for(run.next(ran), timeout=self.turn_s)
                    except TimeoutError:
                        chat.failed("timeout", f"turn timeout: {self.turn_s:g}s exceeded")
                        raise StopRun(
                            "timeout", f"turn timeout: {self.turn_s:g}s exceeded (layer: turn)"
                        ) from None
                    except BaseException as exc:
                        chat.failed(type(exc).__name__, str(exc))
                        raise
                    _chat_ended(chat, node)
                else:
                    beacon.expect("tool", self.tool_s + TOOL_STOP_GRACE_S)
                    node = await run.next(ran)
                beacon.progress()
                await sync_to_async(self.after_node)(run, ran, node)
            return run.result.output, list(run.all_messages())

    def deps(self, agent: Any) -> Any:
        """TaskDeps for an agent that declares it (or declares none)."""
        if agent.deps_type in (TaskDeps, object, type(None)):
            return TaskDeps(workspace=self.workspace, task_id=str(self.task_id))
        return None

    def after_node(self, run: Any, ran: Any, node: Any) -> None:
        """The bookkeeping of one node: a model response is checkpointed before its tools run
        (`after_model`); a tools node that leads to the next model request closes the step
        (`after_step`, the tool results included as that request)."""
        messages = list(run.all_messages())
        if isinstance(node, ModelRequestNode):
            messages.append(node.request)
        self.sdk["messages"] = messages_dump(messages)
        if isinstance(ran, ModelRequestNode) and isinstance(node, CallToolsNode):
            self.record_model_response(node.model_response, run)
            self.commit(trigger="after_model")
            self.boundary_checks(model_next=False)
        elif isinstance(ran, CallToolsNode) and isinstance(node, ModelRequestNode):
            self.state.step_index += 1
            self.state.budget.steps += 1
            self.event(EventType.STEP_FINISHED, {"step": self.state.step_index})
            self.commit(trigger="after_step")
            now = time.monotonic()
            metric_observe(STEP_SECONDS, now - self.step_began)
            self.step_began = now
            self.boundary_checks(model_next=True)
        elif isinstance(node, ModelRequestNode):  # the first request, built from the prompt
            self.step_began = time.monotonic()
            self.boundary_checks(model_next=True)

    def record_model_response(self, response: ModelResponse, run: Any) -> None:
        self.state.model_retries = 0
        self.state.last_error = None
        usage = response.usage
        tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
        self.state.budget.tokens += tokens
        self.state.turn_index += 1
        text = "".join(
            getattr(part, "content", "") for part in response.parts if part.part_kind == "text"
        )
        self.event(
            EventType.MODEL_DECISION,
            {
                "turn": self.state.turn_index,
                "model": response.model_name or "",
                "prompt_tokens": usage.input_tokens or 0,
                "completion_tokens": usage.output_tokens or 0,
                "calls": [
                    {
                        "call_id": self.call_id(part.tool_call_id),
                        "tool": part.tool_name,
                        "args": _jsonable(part.args_as_dict()),
                    }
                    for part in response.tool_calls
                ],
                "final": None,
                "text": text[:TEXT_MAX_CHARS],
            },
        )

    # -- tool calls (called from HarnessTools in the job's thread) -----------------------------

    def call_id(self, tool_call_id: str) -> str:
        return f"{self.sdk['gen']}.{self.state.step_index}.{tool_call_id}"[:100]

    def tool_begin(self, *, call: Any, tool_def: Any, args: Any, approved: bool) -> Plan:
        call_id = self.call_id(call.tool_call_id)
        arguments = _jsonable(args if isinstance(args, dict) else call.args_as_dict())
        row = self.ledger.get(call_id)
        status = row.status if row is not None else None
        if status == ToolCallStatus.SUCCEEDED:
            self.event(EventType.TOOL_REPLAYED, {"call_id": call_id, "tool": row.tool})
            self.commit()
            result = row.result if isinstance(row.result, dict) else {"value": row.result}
            return Plan("replay", value=result.get("value", result))
        if status in (ToolCallStatus.DENIED, ToolCallStatus.REJECTED):
            return Plan("refuse", value=(row.result or {}).get("observation", row.error_message))
        if status in (ToolCallStatus.FAILED, ToolCallStatus.TIMED_OUT) and not self.rerun_failed:
            self.event(EventType.TOOL_REPLAYED, {"call_id": call_id, "tool": row.tool})
            return Plan("retry", value=row.error_message or "the tool failed")
        if status == ToolCallStatus.RUNNING:
            if (tool_def.metadata or {}).get("idempotent"):
                self.event(EventType.TOOL_RERUN_IDEMPOTENT, {"call_id": call_id, "tool": row.tool})
            else:
                raise Escalate(row)
        if status == ToolCallStatus.APPROVED:
            if canonical_hash(arguments) != canonical_hash(row.arguments):
                raise StopRun(
                    "internal_error", f"call {call_id}: approved arguments changed after approval"
                )
        elif status is None or status == ToolCallStatus.AWAITING_REVIEW:
            risk = str((tool_def.metadata or {}).get("risk") or DEFAULT_RISK)
            decision = agent_tool_policy(
                tool_name=call.tool_name,
                args=arguments,
                risk=risk,
                input_schema=tool_def.parameters_json_schema,
                spec=self.task.spec,
            )
            if decision.action == "review" and not approved:
                return Plan("approval", value={"rules": decision.rules, "reason": decision.reason})
            if row is None:
                row = ToolCall(
                    task_id=self.task_id,
                    call_id=call_id,
                    tool=call.tool_name[:100],
                    arguments=arguments,
                    risk=risk[:20],
                    step_index=self.state.step_index,
                )
            if decision.action == "deny":
                feedback = (
                    f"{call.tool_name} was denied by policy: {decision.reason}; choose a safer "
                    "action or explain in the final answer why it is needed"
                )
                services.toolcall_transition(
                    call=row,
                    to=ToolCallStatus.DENIED,
                    fields={
                        "error_class": "denied",
                        "error_message": decision.reason[:2000],
                        "result": {"observation": feedback},
                    },
                    write=False,
                )
                self.event(
                    EventType.TOOL_REFUSED,
                    {"call_id": call_id, "tool": row.tool, "error_class": "denied"},
                )
                self.write_row(row)
                return Plan("refuse", value=feedback)
        services.toolcall_transition(
            call=row,
            to=ToolCallStatus.RUNNING,
            fields={"attempts": row.attempts + 1},
            write=False,
        )
        self.event(
            EventType.TOOL_STARTED,
            {"call_id": call_id, "tool": row.tool, "attempt": row.attempts, "args": arguments},
        )
        # The intent is durable before the tool runs: a crash during it is never re-run blindly.
        self.write_row(row)
        return Plan("run", row=row)

    def write_row(self, row: ToolCall) -> None:
        fields = [
            "status",
            "arguments",
            "result",
            "error_class",
            "error_message",
            "attempts",
            "started_at",
            "finished_at",
            "duration_ms",
        ]
        if row.pk is None:
            self.commit(inserts=[row])
        else:
            self.commit(updates=[(row, fields)])
        self.ledger[row.call_id] = row

    def tool_end(self, *, row: ToolCall, result: Any = None, error: BaseException | None = None):
        finished = timezone.now()
        duration_ms = (finished - row.started_at).total_seconds() * 1000
        if error is None:
            value = _jsonable(result)
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.SUCCEEDED,
                now=finished,
                fields={"result": {"value": value}, "duration_ms": duration_ms},
                write=False,
            )
        else:
            message = str(error) or type(error).__name__
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.FAILED,
                now=finished,
                fields={
                    "error_class": type(error).__name__[:50],
                    "error_message": message[:2000],
                    "result": {"observation": message[:RESULT_MAX_CHARS]},
                    "duration_ms": duration_ms,
                },
                write=False,
            )
        tool_attempt_record(
            tool=tool_label_known(row.tool, self.tool_names),
            seconds=duration_ms / 1000,
            error_class="" if error is None else _tool_error_class(error),
        )
        self.event(
            EventType.TOOL_FINISHED,
            {
                "call_id": row.call_id,
                "tool": row.tool,
                "status": row.status,
                "attempt": row.attempts,
                "duration_ms": round(duration_ms, 3),
                "error_class": row.error_class,
            },
        )
        self.write_row(row)

    def tool_deferred(self, *, row: ToolCall) -> None:
        """The tool raised ApprovalRequired itself when it started: its row waits for review
        (written with the pause)."""
        services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)

    # -- approvals are reviews ---------------------------------------------------------------

    def decisions(self) -> DeferredToolResults | None:
        """The reviewers' decisions on the approvals the run paused for, as Pydantic AI takes
        them; None (the agent asks again) when a review was canceled (a cancel or a rollback);
        pauses again while one is still pending."""
        deferred = self.sdk["deferred"]
        reviews = {
            review.tool_call.call_id: review
            for review in ReviewRequest.objects.filter(
                task_id=self.task_id,
                kind=REVIEW_KIND,
                reopened_as__isnull=True,
                tool_call__call_id__in=[d["call_id"] for d in deferred],
            )
            .select_related("tool_call")
            .order_by("id")
        }
        if any(
            d["call_id"] not in reviews or reviews[d["call_id"]].status == ReviewStatus.CANCELED
            for d in deferred
        ):
            self.sdk["deferred"] = []
            return None
        if any(r.status == ReviewStatus.PENDING for r in reviews.values()):
            self.pause(reason="reviews still pending")
        self.recheck_approvals(list(reviews.values()))
        approvals: dict[str, Any] = {}
        for item in deferred:
            review = reviews[item["call_id"]]
            row = review.tool_call
            if row.status == ToolCallStatus.APPROVED:
                edited = canonical_hash(row.arguments) != canonical_hash(review.original_arguments)
                approvals[item["tool_call_id"]] = (
                    ToolApproved(override_args=row.arguments) if edited else ToolApproved()
                )
            elif review.status == ReviewStatus.EXPIRED:
                approvals[item["tool_call_id"]] = ToolDenied(
                    message=f"the review of {row.tool} expired before a decision; it did not run"
                )
            else:
                reason = review.comment or review.decision_reason or row.error_message
                approvals[item["tool_call_id"]] = ToolDenied(
                    message=f"a reviewer rejected {row.tool}: {reason or 'no reason given'}; "
                    "it did not run"
                )
        self.event(
            EventType.GRAPH_RESUMED,
            {
                "agent": KIND,
                "answers": {
                    d["call_id"]: type(approvals[d["tool_call_id"]]).__name__ for d in deferred
                },
            },
        )
        self.sdk["deferred"] = []
        return DeferredToolResults(approvals=approvals)

    def recheck_approvals(self, reviews: list[ReviewRequest]) -> None:
        """Just before the agent is resumed with them, approvals are checked again
        (review.recheck.interrupt_recheck: deadline, approvers, policy). One that no longer
        holds is not delivered: a new pending review of the call says what changed, and the
        task waits for it."""
        now = timezone.now()
        drifted = [
            (review, check)
            for review in reviews
            if review.status == ReviewStatus.APPROVED
            for check in [interrupt_recheck(review=review, task=self.task, now=now)]
            if not check.holds
        ]
        if not drifted:
            return
        updates: list[tuple[Any, list[str]]] = []
        for review, check in drifted:
            row = review.tool_call
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
            updates.append((row, ["status"]))
            self.event(
                EventType.REVIEW_REQUESTED,
                {
                    "call_id": row.call_id,
                    "tool": row.tool,
                    "reopened_from": review.id,
                    "changes": check.changes,
                },
            )

        def reopen(_checkpoint: Any) -> None:
            for review, check in drifted:
                review_request_open(
                    tool_call=review.tool_call,
                    checkpoint_id=review.checkpoint_id,
                    decision=check.policy,
                    preview=review.preview,
                    kind=REVIEW_KIND,
                    interrupt={k: v for k, v in review.interrupt.items() if k != "decision"},
                    reopened_from=review,
                    changes=check.changes,
                )

        self.pause(
            reason=f"approval no longer holds: {drifted[0][0].tool}", updates=updates, then=reopen
        )

    def pause_for_approvals(self, requests: DeferredToolRequests, messages: list[Any]) -> NoReturn:
        if requests.calls:
            raise StopRun(
                "unsupported",
                "external tool calls (CallDeferred) are not supported: "
                + ", ".join(c.tool_name for c in requests.calls),
            )
        self.sdk["messages"] = messages_dump(messages)
        inserts: list[ToolCall] = []
        updates: list[tuple[Any, list[str]]] = []
        asked: list[tuple[ToolCall, Any]] = []
        for part in requests.approvals:
            call_id = self.call_id(part.tool_call_id)
            row = self.ledger.get(call_id)
            if row is None:
                row = ToolCall(
                    task_id=self.task_id,
                    call_id=call_id,
                    tool=part.tool_name[:100],
                    arguments=_jsonable(part.args_as_dict()),
                    risk=KIND,
                    step_index=self.state.step_index,
                )
                services.toolcall_transition(
                    call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False
                )
                inserts.append(row)
            else:
                if row.status != ToolCallStatus.AWAITING_REVIEW:
                    services.toolcall_transition(
                        call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False
                    )
                updates.append((row, ["status"]))
            asked.append((row, part))
            self.event(
                EventType.REVIEW_REQUESTED,
                {"call_id": call_id, "tool": row.tool, "tool_call_id": part.tool_call_id},
            )
        self.sdk["deferred"] = [
            {"call_id": row.call_id, "tool_call_id": part.tool_call_id} for row, part in asked
        ]

        def open_reviews(checkpoint: Any) -> None:
            for row, part in asked:
                meta = (requests.metadata or {}).get(part.tool_call_id) or {}
                harness = meta.get("harness") if isinstance(meta, dict) else None
                decision = interrupt_policy(tool_name=row.tool, args=row.arguments)
                if harness and harness.get("rules"):
                    decision = dataclasses.replace(
                        decision, rules=harness["rules"], reason=harness.get("reason", "")
                    )
                elif decision.rules and decision.rules[0].get("name") == "langgraph-interrupt":
                    decision = dataclasses.replace(
                        decision,
                        rules=[{"name": "requires-approval", "action": "review", "source": KIND}],
                        reason="the agent's tool requires approval",
                    )
                review_request_open(
                    tool_call=row,
                    checkpoint_id=checkpoint.id if checkpoint else None,
                    decision=decision,
                    preview=json.dumps(row.arguments, indent=2, ensure_ascii=False, default=str),
                    kind=REVIEW_KIND,
                    interrupt={
                        "mode": "per_call",
                        "sdk": KIND,
                        "allowed": DECISIONS,
                        "id": part.tool_call_id,
                        "tool_call_id": part.tool_call_id,
                        "index": 0,
                    },
                )

        self.pause(
            reason=f"approval: {asked[0][0].tool}",
            trigger="before_review",
            inserts=inserts,
            updates=updates,
            then=open_reviews,
        )

    def pause(
        self,
        *,
        reason: str,
        trigger: str | None = None,
        inserts: list[Any] = (),
        updates: list[tuple[Any, list[str]]] = (),
        then: Callable[[Any], None] | None = None,
    ) -> NoReturn:
        def transition(checkpoint: Any) -> None:
            if then is not None:
                then(checkpoint)
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.WAITING_REVIEW,
                expect_epoch=self.epoch,
                reason=reason[:500],
                fields={"worker_id": ""},
            )

        self.commit(trigger=trigger, inserts=list(inserts), updates=list(updates), then=transition)
        raise Paused()

    def escalate(self, row: ToolCall) -> str:
        """A tool that was running when its worker died, not declared idempotent: whether it
        took effect is unknown, so a human decides (review.services: mark done, re-run, fail)."""

        def pause(events: list[Any], open_review: Any) -> NoReturn:
            self.pending_events.extend(events)
            self.pause(
                reason=f"unknown outcome: {row.tool}",
                updates=[(row, ["status", "finished_at", "error_class", "error_message"])],
                then=lambda _checkpoint: open_review(self.head_id),
            )

        try:
            review_gate_unknown_outcome(
                tool_call=row, step_index=self.state.step_index, message=None, pause=pause
            )
        except Paused:
            return "paused"
        except LeaseLost:
            return "lease_lost"
        return "paused"

    def retry_model(self, exc: Exception) -> str:
        """A transient model error: back off through RQ's scheduler (retry_wait, then the task
        resumes from its last checkpoint: the model is asked again), up to the policy's
        attempts; then the task fails with `model_error`."""
        message = f"{type(exc).__name__}: {exc}"[:2000]
        attempt = self.state.model_retries + 1
        policy = retry_policy(config=self.config, task_override=self.spec.retry)
        if attempt >= policy.max_attempts:
            return self.finish_stopped(
                StopRun("model_error", f"{message} (after {attempt} attempts)")
            )
        delay_s = policy.delay_s(attempt)
        retry_at = timezone.now() + timedelta(seconds=delay_s)
        self.state.model_retries = attempt
        self.state.last_error = ErrorInfo(
            error_class=TRANSIENT, message=message, step_index=self.state.step_index
        )
        self.event(
            EventType.RETRY_SCHEDULED,
            {
                "attempt": attempt,
                "error_class": TRANSIENT,
                "message": message[:500],
                "delay_s": round(delay_s, 3),
                "retry_at": retry_at.isoformat(),
            },
        )
        fields = {"retry_at": retry_at, "retry_count": self.task.retry_count + 1}

        def wait(_checkpoint: Any) -> None:
            services.task_enqueue(task=self.task, delay_s=delay_s)
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.RETRY_WAIT,
                expect_epoch=self.epoch,
                reason=f"retry in {delay_s:.1f}s after a transient model error",
                fields={"worker_id": "", **fields},
            )

        try:
            self.commit(trigger="on_retryable_error", then=wait)
        except LeaseLost:
            return "lease_lost"
        return "paused"

    # -- the end -----------------------------------------------------------------------------

    def finish(self, output: Any, messages: list[Any]) -> str:
        self.sdk["messages"] = messages_dump(messages)
        result = _text(_jsonable(output), RESULT_MAX_CHARS)
        self.state.final = result
        self.state.phase = "done"
        self.state.step_index += 1
        self.state.budget.steps += 1
        self.event(EventType.STEP_FINISHED, {"step": self.state.step_index})
        self.event(EventType.TASK_FINISHED, {"result": result[:2000]})
        self.commit(
            trigger="after_step",
            then=lambda _checkpoint: services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.SUCCEEDED,
                expect_epoch=self.epoch,
                reason="agent finished",
                fields={"result": result, **self.usage()},
            ),
        )
        return "succeeded"

    def finish_stopped(self, stop: StopRun) -> str:
        self.state.last_error = ErrorInfo(
            error_class=stop.error_class,
            message=stop.message[:2000],
            step_index=self.state.step_index,
        )
        self.event(
            EventType.TASK_STOPPED,
            {"error_class": stop.error_class, "message": stop.message[:2000]},
        )
        ended: list[str] = []
        try:
            self.commit(
                then=lambda _checkpoint: ended.append(
                    stop_transition(
                        task_id=self.task_id, epoch=self.epoch, stop=stop, usage=self.usage()
                    )
                ),
            )
        except LeaseLost:
            return "lease_lost"
        return str(ended[0])


def _tool_error_class(error: BaseException) -> str:
    """A tool's exception as an error class of the metrics: ModelRetry is the tool refusing
    its arguments (`permanent`)."""
    return "permanent" if isinstance(error, ModelRetry) else tool_exception_class(error)
