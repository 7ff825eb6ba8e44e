"""A Pydantic AI agent for the history-storage tests: a zero-latency FunctionModel calls `note`
once per turn for `steps` turns (then `publish`, which needs approval, when `gated`), then
answers with what it found in its whole history (turns, tool returns, the prompt's tag): an
answer that shows a history cut short or mixed up with another checkpoint's."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.pydantic_ai_runner import TaskDeps


def _job(messages: list[ModelMessage]) -> dict[str, Any]:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "user-prompt" and isinstance(part.content, str):
                    return dict(json.loads(part.content))
    return {}


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    job = _job(messages)
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    returns = [
        part.content
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if part.part_kind == "tool-return"
    ]
    if turn < job["steps"]:
        return ModelResponse(parts=[ToolCallPart("note", {"i": turn})])
    if job.get("gated") and turn == job["steps"]:
        return ModelResponse(parts=[ToolCallPart("publish", {})])
    noted = [r for r in returns if str(r).startswith("noted ")]
    in_order = noted == [f"noted {i}" for i in range(len(noted))]
    return ModelResponse(parts=[TextPart(f"done {turn} {len(noted)} {in_order} {job['tag']}")])


def history_agent() -> Agent[TaskDeps, str]:
    agent: Agent[TaskDeps, str] = Agent(FunctionModel(_model), deps_type=TaskDeps)

    @agent.tool_plain
    def note(i: int) -> str:
        """Note a number."""
        return f"noted {i}"

    @agent.tool_plain(requires_approval=True)
    def publish() -> str:
        """Publish the notes."""
        return "published"

    return agent
