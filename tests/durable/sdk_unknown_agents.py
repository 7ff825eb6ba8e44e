"""SDK agents whose one tool call hangs the first time it runs (a test kills the worker during
it), then answers quickly: tests/durable/test_sdk_unknown_outcome.py. Each records every start
and end of the tool, so a test can count how often it ran across the crash and the review.

- `deployer` (OpenAI Agents SDK): its scripted model calls `deploy(version="2.0")`, then
  answers "done: <the tool's output>"; the tool records in HARNESS_LEDGER_DIR/<task id>.agents.log
  (tests.durable.openai_agents.executions).
- `pai_deployer` (Pydantic AI): its FunctionModel calls `deploy(version="2.0")`, then answers
  "finished: <the tool's output>"; the tool records in `<marker_dir>/runs`
  (tests.durable.pai_agents.runs; the task's input names marker_dir)."""

from __future__ import annotations

import time
from typing import Any

from agents import Agent, RunContextWrapper, function_tool
from pydantic_ai import Agent as PaiAgent
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.pydantic_ai_runner import TaskDeps

from .openai_agents import CountingModel, _answer, _record, executions
from .pai_agents import _call, last_result, mark, task_input, turns

# Long enough that only the test's kill ends the first attempt.
HANG_S = 20


@function_tool
def deploy(context: RunContextWrapper[Any], version: str) -> str:
    """Deploy a release (an external side effect, not idempotent)."""
    first = "deploy:start" not in executions(context.context["harness_task_id"])
    _record(context, "deploy:start")
    if first:
        time.sleep(HANG_S)
    _record(context, "deploy:end")
    return f"deployed {version}"


def deployer() -> Agent:
    """A factory: a fresh scripted model per worker."""
    return Agent(
        name="deployer",
        instructions="Deploy, then say so.",
        tools=[deploy],
        model=CountingModel([[("deploy", {"version": "2.0"})], _answer]),
    )


def pai_deployer_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if turns(messages) == 0:
        return _call("deploy", version="2.0")
    return ModelResponse(parts=[TextPart(f"finished: {last_result(messages)}")])


pai_deployer = PaiAgent(FunctionModel(pai_deployer_model), deps_type=TaskDeps)


@pai_deployer.tool(name="deploy")
def pai_deploy(ctx: RunContext[TaskDeps], version: str) -> str:
    """Deploy a release (an external side effect, not idempotent)."""
    runs_file = f"{task_input(ctx.messages)['marker_dir']}/runs"
    try:
        first = "deploy:start" not in open(runs_file).read().split()
    except FileNotFoundError:
        first = True
    mark(ctx.messages, "deploy:start")
    if first:
        time.sleep(HANG_S)
    mark(ctx.messages, "deploy:end")
    return f"deployed {version}"
