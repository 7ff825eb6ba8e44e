"""A Pydantic AI agent for the case tests (tests/cases/test_sdk_case_workers.py), driven by a
FunctionModel (no network): it looks up a price (a read tool: a replay runs it and checks its
answer), writes it to the workspace (a write tool: runs in the replay's own workspace) and
notifies someone (an external tool: a replay answers it from the recording), then answers.

The task's input is JSON {"marker_dir"}: every model turn and tool run appends a line to
`<marker_dir>/runs`. The price is PAI_CASE_PRICE of the process running the tool (42 when
unset), so a test changes the tool's answer by restarting the worker with another."""

from __future__ import annotations

import os

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.pydantic_ai_runner import TaskDeps
from tasks.paths import file_write
from tests.durable.pai_agents import last_result, mark, turns


def pricing_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = turns(messages)
    mark(messages, f"model{step}")
    if step == 0:
        return ModelResponse(parts=[ToolCallPart("lookup", {"item": "widget"})])
    if step == 1:
        price = last_result(messages)
        return ModelResponse(
            parts=[
                TextPart("writing it down"),
                ToolCallPart("write", {"path": "price.txt", "text": price}),
            ]
        )
    if step == 2:
        return ModelResponse(parts=[ToolCallPart("notify", {"message": "price noted"})])
    return ModelResponse(parts=[TextPart(f"the widget costs {last_result(messages)}")])


pricing = Agent(FunctionModel(pricing_model), deps_type=TaskDeps)


@pricing.tool(metadata={"risk": "read"})
def lookup(ctx: RunContext[TaskDeps], item: str) -> str:
    """The price of `item`."""
    mark(ctx.messages, "lookup")
    return os.environ.get("PAI_CASE_PRICE", "42")


@pricing.tool(metadata={"risk": "write"})
def write(ctx: RunContext[TaskDeps], path: str, text: str) -> str:
    """Write `text` to the workspace file `path`."""
    mark(ctx.messages, "write")
    file_write(ctx.deps.workspace, path, text.encode())
    return f"wrote {path}"


@pricing.tool(metadata={"risk": "external"})
def notify(ctx: RunContext[TaskDeps], message: str) -> str:
    """Tell someone `message` (a side effect outside the workspace)."""
    mark(ctx.messages, "notify")
    return "sent"
