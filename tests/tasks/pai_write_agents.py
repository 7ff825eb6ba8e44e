"""A Pydantic AI agent for the write-cadence tests: a zero-latency FunctionModel calls `probe`
once per turn for `steps` turns, then answers. `probe` looks, over a connection of its own
(so it sees only what is committed), at what the harness has made durable by the time the
tool runs, and returns it."""

from __future__ import annotations

import gc
import json
from typing import Any

from django.db import connection, models
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.pydantic_ai_runner import TaskDeps
from checkpoints.models import Checkpoint
from tasks.models import Task, ToolCall


def _steps(messages: list[ModelMessage]) -> int:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "user-prompt" and isinstance(part.content, str):
                    return int(json.loads(part.content)["steps"])
    return 0


def _calling(tool: str) -> FunctionModel:
    """A model that calls `tool` once a turn for the input's `steps` turns, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < _steps(messages):
            return ModelResponse(parts=[ToolCallPart(tool, {"turn": turn})])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model)


def _committed(task_id: str) -> dict[str, Any]:
    head = Task.objects.get(id=task_id).head_checkpoint_id
    latest = Checkpoint.objects.filter(task_id=task_id).order_by("-seq").first()
    return {
        "calls": dict(
            ToolCall.objects.filter(task_id=task_id)
            .order_by("step_index")
            .values_list("step_index", "status")
        ),
        "head_is_latest": latest is not None and head == latest.id,
        "latest": None if latest is None else [latest.trigger, latest.step_index],
    }


def probe_agent() -> Agent[TaskDeps, str]:
    agent: Agent[TaskDeps, str] = Agent(_calling("probe"), deps_type=TaskDeps)

    @agent.tool
    def probe(ctx: RunContext[TaskDeps], turn: int) -> str:
        """What is durable now."""
        try:
            return json.dumps({"turn": turn, **_committed(ctx.deps.task_id)})
        finally:
            connection.close()  # this thread's own connection

    return agent


# The turns `steal`'s tool ran in (this process), and the turn after which it takes the lease
# away as another worker would (the lease epoch moved on from a connection of its own).
STOLEN_AFTER = 1
stolen_turns: list[int] = []


def steal_agent() -> Agent[TaskDeps, str]:
    agent: Agent[TaskDeps, str] = Agent(_calling("steal"), deps_type=TaskDeps)

    @agent.tool
    def steal(ctx: RunContext[TaskDeps], turn: int) -> str:
        """Take the lease after turn STOLEN_AFTER."""
        stolen_turns.append(turn)
        try:
            if turn == STOLEN_AFTER:
                Task.objects.filter(id=ctx.deps.task_id).update(
                    lease_epoch=models.F("lease_epoch") + 1
                )
            return "ok"
        finally:
            connection.close()

    return agent


def collector_agent() -> Agent[TaskDeps, str]:
    """Its tool returns the collector's thresholds as the run has them."""
    agent: Agent[TaskDeps, str] = Agent(_calling("thresholds"), deps_type=TaskDeps)

    @agent.tool_plain
    def thresholds(turn: int) -> list[int]:
        """The garbage collector's thresholds now."""
        return list(gc.get_threshold())

    return agent
