"""A Pydantic AI agent run as a task (docs/pydantic-ai.md). Registered in harness.yaml:

    pydantic_ai_agents:
      release_notes: "examples.pydantic_ai_agent:agent"

and started with a spec such as

    {"title": "notes", "goal": "write the release notes",
     "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "v1.5: faster search"}}

It writes the notes into the task's workspace (`write_note`, run under the harness's review
rules and snapshotted for rollback) and then asks to publish them (`publish`, a Pydantic AI
tool with `requires_approval=True`: a review in the inbox; approve, edit the channel, or reject).

Its model is a FunctionModel that plays a fixed script, so the demo runs without a network or a
key. Give the spec `"model": {"kind": "openai", "model": ...}` inside `agent` to run it on an
OpenAI-compatible endpoint the operator allowed (keys are bound to endpoints, never in a spec).
"""

from __future__ import annotations

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.pydantic_ai_runner import TaskDeps
from tasks.paths import file_append, file_read, file_write

NOTES = "notes/release.md"


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "user-prompt" and isinstance(part.content, str):
                    return part.content
    return ""


def _last_tool_result(messages: list[ModelMessage]) -> str:
    for part in reversed(messages[-1].parts if messages else []):
        if part.part_kind in ("tool-return", "retry-prompt"):
            return str(part.content if part.part_kind == "tool-return" else part.model_response())
    return ""


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Turn 1: write the notes. Turn 2: publish them. Turn 3: report what happened."""
    turns = sum(isinstance(m, ModelResponse) for m in messages)
    if turns == 0:
        text = f"# Release notes\n\n{_prompt(messages) or 'No changes listed.'}\n"
        return ModelResponse(parts=[ToolCallPart("write_note", {"path": NOTES, "text": text})])
    if turns == 1:
        return ModelResponse(
            parts=[ToolCallPart("publish", {"channel": "#general", "path": NOTES})]
        )
    return ModelResponse(parts=[TextPart(f"Done. {_last_tool_result(messages)}")])


agent = Agent(
    FunctionModel(scripted),
    deps_type=TaskDeps,
    name="release_notes",
    instructions="Write release notes into the workspace, then publish them.",
)


@agent.tool(metadata={"risk": "write"})
def write_note(ctx: RunContext[TaskDeps], path: str, text: str) -> str:
    """Write `text` to the workspace file `path` (relative)."""
    file_write(ctx.deps.workspace, path, text.encode())
    return f"wrote {len(text)} characters to {path}"


@agent.tool(requires_approval=True)
def publish(ctx: RunContext[TaskDeps], channel: str, path: str) -> str:
    """Publish the workspace file `path` to `channel` (recorded in published.log)."""
    content = file_read(ctx.deps.workspace, path, 1_000_000)
    if content is None:
        return f"{path} does not exist; nothing was published"
    line = f"{channel}: {path} ({len(content)} bytes)\n"
    file_append(ctx.deps.workspace, "published.log", line.encode())
    return f"published {path} to {channel}"
