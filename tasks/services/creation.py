"""Creating a task: the checks of its spec beyond the pydantic schema (tools, agents, models,
timeouts, replay sources; SpecError names the field) and `task_create`, durable before it is
acknowledged and enqueued after commit."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from harness_base.config import harness_config
from tasks.errors import NotFound
from tasks.events import EventType
from tasks.models import Task, TaskEvent
from tasks.selectors import access_task
from tasks.services.enqueue import task_enqueue
from tasks.services.events import event_record
from tasks.services.task_transitions import task_transition
from tasks.spec import (
    AgentKindSpec,
    ModelEndpointError,
    OpenAIAgentsSpec,
    PydanticAIAgentSpec,
    TaskSpec,
    model_endpoint,
)
from tasks.states import (
    TaskStatus,
)
from tasks.tools.mcp import mcp_server_of
from tasks.tools.registry import UnknownTool, registry


class SpecError(ValueError):
    """A TaskSpec that parses but cannot run; `field` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def task_spec_check(spec: TaskSpec, *, user: User | None) -> None:
    """Checks that need the registry, the config or the creating user, beyond the pydantic
    schema."""
    _tools_check(spec.tools, spec.model, prefix="")
    if spec.agent is not None:
        _agent_spec_check(spec.agent, user=user)
    for name, agent in (spec.agents or {}).items():
        _tools_check(agent.tools, agent.model, prefix=f"agents.{name}.")
        _model_spec_check(agent.model, user=user, field=f"agents.{name}.model")
    _model_spec_check(spec.model, user=user, field="model")
    _timeouts_check(spec)


def _tools_check(tools: list[str], model: Any, *, prefix: str) -> None:
    for index, name in enumerate(tools):
        if mcp_server_of(name) is not None:
            # An MCP server's tool: the server says which exist when the task starts.
            continue
        try:
            registry.get(name)
        except UnknownTool:
            known = ", ".join(registry.names())
            raise SpecError(
                f"{prefix}tools.{index}", f"unknown tool {name!r}; known: {known}"
            ) from None
    if model is not None and model.kind == "scripted":
        allowed = set(tools)
        for t_index, turn in enumerate(model.script):
            names = [turn.call] if turn.call else [c.call for c in turn.calls or []]
            for name in names:
                if name and name not in allowed and mcp_server_of(name) is None:
                    # A scripted model may deliberately call a tool it was not given (to test
                    # the harness's refusal), but never one that does not exist at all.
                    try:
                        registry.get(name)
                    except UnknownTool:
                        raise SpecError(
                            f"{prefix}model.script.{t_index}", f"unknown tool {name!r}"
                        ) from None


def _timeouts_check(spec: TaskSpec) -> None:
    """Session > turn > tool, each from the spec's budget or harness.yaml's `timeouts`; the
    error names the field the spec set (or should set) to fix the order."""
    defaults = harness_config().timeouts
    budget = spec.budget
    tool_s = budget.tool_timeout_s or defaults.tool_s
    turn_s = budget.turn_timeout_s or defaults.turn_s
    session_s = budget.session_timeout_s or defaults.session_s
    got = f"(got tool={tool_s:g}s, turn={turn_s:g}s, session={session_s:g}s)"
    if not tool_s < turn_s:
        field = "tool_timeout_s" if budget.tool_timeout_s else "turn_timeout_s"
        raise SpecError(
            f"budget.{field}", f"the tool timeout must be shorter than the turn timeout {got}"
        )
    if not turn_s < session_s:
        field = "turn_timeout_s" if budget.turn_timeout_s else "session_timeout_s"
        raise SpecError(
            f"budget.{field}", f"the turn timeout must be shorter than the session timeout {got}"
        )


def _agent_spec_check(agent: AgentKindSpec, *, user: User | None) -> None:
    if isinstance(agent, PydanticAIAgentSpec | OpenAIAgentsSpec):
        key, what = {
            "pydantic-ai": ("pydantic_ai_agents", "Pydantic AI agent"),
            "openai-agents": ("openai_agents", "OpenAI Agents SDK agent"),
        }[agent.kind]
        agents = getattr(harness_config(), key)
        if agent.name not in agents:
            known = ", ".join(sorted(agents)) or f"none (harness.yaml {key})"
            raise SpecError("agent.name", f"unknown {what} {agent.name!r}; registered: {known}")
        _model_spec_check(agent.model, user=user, field="agent.model")
        return
    graphs = harness_config().langgraph_graphs
    if agent.graph not in graphs:
        known = ", ".join(sorted(graphs)) or "none (harness.yaml langgraph_graphs)"
        raise SpecError("agent.graph", f"unknown graph {agent.graph!r}; registered: {known}")


def _model_spec_check(model: Any, *, user: User | None, field: str) -> None:
    if model is None:
        return
    if model.kind == "openai":
        try:
            model_endpoint(model)
        except ModelEndpointError as exc:
            raise SpecError(field, str(exc)) from None
    elif model.kind == "replay":
        _replay_source_check(task_id=model.task_id, user=user, field=f"{field}.task_id")


def _replay_source_check(*, task_id: str, user: User | None, field: str) -> None:
    """A replay answers with another task's recorded model decisions (its calls' arguments,
    its texts): only from a task the creating user may read. No user (a creator since
    deleted) reads nothing. One message for a task that does not exist and one the user may
    not read, so the answer does not tell which ids exist."""
    try:
        source = access_task(user, task_id) if user is not None else None
    except NotFound:
        source = None
    if source is None:
        raise SpecError(field, f"no task {task_id} that you may read")
    if not TaskEvent.objects.filter(task=source, type=EventType.MODEL_DECISION).exists():
        raise SpecError(field, f"task {task_id} has no recorded model decisions to replay")


def task_create(
    *,
    spec: TaskSpec,
    user: User | None,
    enqueue: bool = True,
    parent: Task | None = None,
    parent_call_id: str = "",
    agent_name: str = "",
    is_replay: bool = False,
    fork_of: Task | None = None,
) -> Task:
    """Validate, store and (after commit) enqueue a task. Durable before acknowledged. A child
    task names its parent, the parent's delegate call and the sub-agent it runs; a replay of
    a saved case says so (`is_replay`)."""
    task_spec_check(spec, user=user)
    with transaction.atomic():
        task = Task.objects.create(
            title=spec.title,
            goal=spec.goal,
            spec=spec.model_dump(mode="json", exclude_none=True),
            priority=spec.priority,
            created_by=user if user is not None and user.is_authenticated else None,
            parent=parent,
            parent_call_id=parent_call_id,
            agent_name=agent_name,
            is_replay=is_replay,
            fork_of=fork_of,
            plan_phase="planning" if spec.mode == "plan" else "",
        )
        actor = user.get_username() if user is not None and user.is_authenticated else ""
        payload: dict[str, Any] = {"title": spec.title}
        if parent is not None:
            payload.update(parent_id=str(parent.id), agent=agent_name, call_id=parent_call_id)
        event_record(task_id=task.id, type=EventType.CREATED, payload=payload, actor=actor)
        if enqueue:
            task = task_transition(
                task_id=task.id, to=TaskStatus.QUEUED, reason="created", actor=actor
            )
            task_enqueue(task=task)
    return task
