"""Pydantic AI agents for the worker tests (tests/durable/test_pydantic_ai_workers.py), each
driven by a FunctionModel (no network). The task's input is JSON: {"marker_dir", "sleep_s"};
every tool run and slow model turn appends a line to `<marker_dir>/runs`, so a test can see
what ran how often across crashes, reviews and rollbacks."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import NativeTool
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from agent.pydantic_ai_runner import TaskDeps
from tasks.paths import file_write


def task_input(messages: list[ModelMessage]) -> dict[str, Any]:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "user-prompt" and isinstance(part.content, str):
                    return json.loads(part.content)
    return {}


def mark(messages: list[ModelMessage], line: str) -> None:
    with open(Path(task_input(messages)["marker_dir"]) / "runs", "a") as out:
        out.write(line + "\n")


def runs(marker_dir: Path) -> list[str]:
    path = marker_dir / "runs"
    return path.read_text().split() if path.exists() else []


def turns(messages: list[ModelMessage]) -> int:
    return sum(isinstance(m, ModelResponse) for m in messages)


def last_result(messages: list[ModelMessage]) -> str:
    parts = messages[-1].parts if messages else []
    return " | ".join(str(getattr(p, "content", "")) for p in parts)


def _call(tool: str, **args: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool, args)])


# --- files: three steps of file writes, then an answer ----------------------------------------


def files_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = turns(messages)
    if step == 0:
        return _call("write", path="a.txt", text="a1")
    if step == 1:
        # Slow, so a test can kill the worker while the model "thinks".
        mark(messages, "model1:start")
        time.sleep(float(task_input(messages).get("sleep_s", 0)))
        mark(messages, "model1:end")
        return _call("write", path="b.txt", text="b1")
    if step == 2:
        return _call("write", path="a.txt", text="a2")
    return ModelResponse(parts=[TextPart(f"done after {step} writes: {last_result(messages)}")])


files = Agent(FunctionModel(files_model), deps_type=TaskDeps)


@files.tool
def write(ctx: RunContext[TaskDeps], path: str, text: str) -> str:
    """Write `text` to the workspace file `path`."""
    mark(ctx.messages, f"write:{path}={text}")
    file_write(ctx.deps.workspace, path, text.encode())
    return f"wrote {path}"


# --- slow tool: a tool the worker dies in -----------------------------------------------------


def slow_tool_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if turns(messages) == 0:
        return _call("slow_write", path="s.txt")
    return ModelResponse(parts=[TextPart(f"finished: {last_result(messages)}")])


slow_tool = Agent(FunctionModel(slow_tool_model), deps_type=TaskDeps)


@slow_tool.tool
def slow_write(ctx: RunContext[TaskDeps], path: str) -> str:
    """Write a file, slowly."""
    mark(ctx.messages, "slow:start")
    time.sleep(float(task_input(ctx.messages).get("sleep_s", 0)))
    file_write(ctx.deps.workspace, path, b"slow")
    mark(ctx.messages, "slow:end")
    return f"wrote {path}"


# --- approvals: a requires_approval tool, a tool that asks itself, one our rules review ------


def approvals_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = turns(messages)
    if step == 0:
        return _call("deploy", env="staging")
    if step == 1:
        return _call("transfer", amount=50)
    if step == 2:
        return _call("transfer", amount=5000)
    if step == 3:
        return _call("configure", path="app.conf", value="x=1")
    return ModelResponse(parts=[TextPart(f"all done: {last_result(messages)}")])


approvals = Agent(FunctionModel(approvals_model), deps_type=TaskDeps)


@approvals.tool(requires_approval=True)
def deploy(ctx: RunContext[TaskDeps], env: str) -> str:
    """Deploy to `env`."""
    mark(ctx.messages, f"deploy:{env}")
    return f"deployed to {env}"


@approvals.tool
def transfer(ctx: RunContext[TaskDeps], amount: int) -> str:
    """Transfer `amount`; large amounts need a human's approval."""
    if amount > 1000 and not ctx.tool_call_approved:
        raise ApprovalRequired()
    mark(ctx.messages, f"transfer:{amount}")
    return f"transferred {amount}"


@approvals.tool(metadata={"risk": "write"})
def configure(ctx: RunContext[TaskDeps], path: str, value: str) -> str:
    """Write a configuration file (the harness's protected-config rule reviews *.conf)."""
    mark(ctx.messages, f"configure:{path}")
    file_write(ctx.deps.workspace, path, value.encode())
    return f"configured {path}"


# --- fragile: a tool that fails until the workspace says otherwise ----------------------------


def fragile_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = turns(messages)
    if step == 0:
        return _call("write", path="a.txt", text="a1")
    if step == 1:
        return _call("fragile", path="b.txt")
    return ModelResponse(parts=[TextPart(f"done: {last_result(messages)}")])


fragile_agent = Agent(FunctionModel(fragile_model), deps_type=TaskDeps)
fragile_agent.tool(write)


@fragile_agent.tool
def fragile(ctx: RunContext[TaskDeps], path: str) -> str:
    """Write `path`; fails while the workspace has no `ok` file."""
    mark(ctx.messages, "fragile")
    if not (ctx.deps.workspace / "ok").exists():
        raise RuntimeError("disk full")
    file_write(ctx.deps.workspace, path, b"b1")
    return f"wrote {path}"


# --- denied: our deny rule on a tool ----------------------------------------------------------


def denied_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if turns(messages) == 0:
        return _call("shell", command="rm -rf /")
    return ModelResponse(parts=[TextPart(f"gave up: {last_result(messages)}")])


denied = Agent(FunctionModel(denied_model), deps_type=TaskDeps)


@denied.tool(metadata={"risk": "execute"})
def shell(ctx: RunContext[TaskDeps], command: str) -> str:
    """Run a command (never, in these tests)."""
    mark(ctx.messages, f"shell:{command}")
    return "ran"


# --- modelless: the harness binds the model (tests/security/test_pydantic_ai_model_keys.py) ----


modelless = Agent(None, deps_type=TaskDeps)


@modelless.tool_plain
def echo(text: str) -> str:
    """Say `text` back."""
    return f"echo: {text}"


# --- long: `steps` tool calls, then an answer (more model requests than Pydantic AI's default
# request_limit of 50 per run) ---------------------------------------------------------------


def long_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if turns(messages) >= task_input(messages)["steps"]:
        return ModelResponse(parts=[TextPart(f"done after {turns(messages)} turns")])
    return _call("tick")


long_run = Agent(FunctionModel(long_model), deps_type=TaskDeps)


@long_run.tool_plain
def tick() -> str:
    """Count one."""
    return "ok"


# --- external: a tool a person answers (CallDeferred), asked twice ----------------------------


def external_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = turns(messages)
    if step < 3:
        return _call("ask_warehouse", sku=f"sku-{step}")
    return ModelResponse(parts=[TextPart(f"stock: {answers(messages)}")])


def answers(messages: list[ModelMessage]) -> str:
    """Every tool answer the model was given, in order (a failed call as `failed: ...`)."""
    seen = []
    for message in messages:
        for part in getattr(message, "parts", []):
            if part.part_kind in ("tool-return", "retry-prompt"):
                failed = getattr(part, "outcome", "success") != "success"
                seen.append(("failed: " if failed else "") + str(part.content))
    return " | ".join(seen)


external = Agent(FunctionModel(external_model), deps_type=TaskDeps)


@external.tool
def ask_warehouse(ctx: RunContext[TaskDeps], sku: str) -> str:
    """How many of `sku` the warehouse holds: a person there answers."""
    mark(ctx.messages, f"ask:{sku}")
    raise CallDeferred()


# --- declared external: a tool the agent's code never implements (ExternalToolset) ------------


def refund_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if turns(messages) == 0:
        return _call("issue_refund", order="o-17", amount=30)
    return ModelResponse(parts=[TextPart(f"refund: {answers(messages)}")])


declared_external = Agent(
    FunctionModel(refund_model),
    deps_type=TaskDeps,
    toolsets=[
        ExternalToolset(
            [
                ToolDefinition(
                    name="issue_refund",
                    description="Refund an order (done by the billing team).",
                    parameters_json_schema={
                        "type": "object",
                        "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}},
                        "required": ["order", "amount"],
                    },
                )
            ]
        )
    ],
)


# --- searcher: a native (hosted) tool the provider runs (agent.pydantic_ai_runner.hosted) ------


def searcher_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Searches the web when the request offers it the native `web_search` tool (the call and
    its result in the response, as a provider returns them), else answers without; marks what
    each turn was offered (`offered:web_search`, `offered:nothing`)."""
    offered = [tool.kind for tool in info.model_request_parameters.native_tools]
    mark(messages, "offered:" + ("+".join(offered) or "nothing"))
    if "web_search" not in offered:
        return ModelResponse(parts=[TextPart("answered without searching")])
    return ModelResponse(
        parts=[
            NativeToolCallPart(
                tool_name="web_search",
                args={"query": "durable agent harness"},
                tool_call_id="ws_1",
                provider_name="function",
            ),
            NativeToolReturnPart(
                tool_name="web_search",
                content=[{"url": "https://example.org/harness", "title": "Harness"}],
                tool_call_id="ws_1",
                provider_name="function",
            ),
            TextPart("found example.org/harness"),
        ]
    )


searcher = Agent(
    FunctionModel(searcher_model), deps_type=TaskDeps, capabilities=[NativeTool(WebSearchTool())]
)
