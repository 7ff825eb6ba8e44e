"""An OpenAI Agents SDK agent run as a harness task (docs/openai-agents.md). Registered in
harness.yaml as `release_writer`:

    openai_agents:
      release_writer: "examples.openai_agents_agent:agent"

It drafts release notes into the task's workspace (`write_notes`: the harness's policy decides,
and rollback restores the file) and then publishes them (`publish`: `needs_approval=True`, so
a person always approves, edits or rejects the call first).

The model is scripted (`ScriptedTurns`, an implementation of the SDK's `Model` interface: no
network, no key) so the example runs anywhere. Its answer depends only on the conversation it is
given, never on what it answered before in this process, so a task resumed by another worker
after a crash gets the same answers. Give the agent any other model for real work, or bind one
per task with the spec's `agent.model`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    RunContextWrapper,
    Usage,
    function_tool,
)
from agents.testing import assistant_message, function_call

# One turn of a script: tool calls [(tool, arguments)], or the final answer (a str, or a
# function of the conversation so far returning one).
Turn = list[tuple[str, dict[str, Any]]] | str | Callable[[list[Any]], str]

_TURN_ID = re.compile(r"^call_t(\d+)_")


def _get(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def turn_of(items: Sequence[Any]) -> int:
    """Which turn the conversation is at: one past the newest turn whose calls it holds (the
    scripted call ids name their turn)."""
    done = 0
    for item in items:
        for name in ("call_id", "approval_request_id", "id"):
            match = _TURN_ID.match(str(_get(item, name) or ""))
            if match:
                done = max(done, int(match.group(1)) + 1)
    return done


def last_output(items: Sequence[Any]) -> str:
    """The newest tool output of the conversation (what the last call answered)."""
    for item in reversed(list(items)):
        if _get(item, "type") == "function_call_output":
            return str(_get(item, "output"))
    return ""


class ScriptedTurns(Model):
    """The SDK's `Model` interface answering from a script by the conversation's turn."""

    def __init__(self, script: list[Turn], *, usage: tuple[int, int] = (12, 5)) -> None:
        self.script = script
        self.usage = usage

    def before_turn(self, turn: int, items: list[Any]) -> None:
        """Called before each answer (tests block or count here)."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        turn = turn_of(items)
        self.before_turn(turn, items)
        step = self.script[min(turn, len(self.script) - 1)]
        if callable(step):
            step = step(items)
        if isinstance(step, str):
            output = [assistant_message(step, item_id=f"msg_t{turn}")]
        else:
            # (tool, arguments) pairs, or ready-made output items (e.g. a hosted MCP tool's
            # approval request)
            output = [
                function_call(entry[0], entry[1], call_id=f"call_t{turn}_{index}")
                if isinstance(entry, tuple)
                else entry
                for index, entry in enumerate(step)
            ]
        return ModelResponse(
            output=output,
            usage=Usage(
                requests=1,
                input_tokens=self.usage[0],
                output_tokens=self.usage[1],
                total_tokens=sum(self.usage),
            ),
            response_id=None,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("ScriptedTurns answers run(), not run_streamed()")


def workspace(context: RunContextWrapper[Any]) -> Path:
    """The task's workspace: the harness passes it in the run context."""
    return Path(context.context["harness_workspace"])


@function_tool
def write_notes(context: RunContextWrapper[Any], path: str, text: str) -> str:
    """Write release notes to a file in the workspace."""
    target = workspace(context) / path
    if not target.resolve().is_relative_to(workspace(context).resolve()):
        return f"refused: {path} is outside the workspace"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return f"wrote {len(text)} characters to {path}"


@function_tool(needs_approval=True)
def publish(version: str, channel: str = "#releases") -> str:
    """Publish the release announcement (always approved by a person first)."""
    return f"published {version} to {channel}"


def _answer(items: list[Any]) -> str:
    return f"done: {last_output(items)}"


SCRIPT: list[Turn] = [
    [("write_notes", {"path": "NOTES.md", "text": "# 1.5.0\n- faster search\n"})],
    [("publish", {"version": "1.5.0"})],
    _answer,
]

TOOLS: list[FunctionTool] = [write_notes, publish]

agent = Agent(
    name="release_writer",
    instructions="Draft the release notes, then publish the release.",
    tools=TOOLS,
    model=ScriptedTurns(SCRIPT),
)


def example_spec() -> dict[str, Any]:
    """A task spec running this agent (the demo seeds one like it)."""
    return {
        "title": "Release 1.5.0 (OpenAI Agents SDK)",
        "goal": "Write the release notes and publish 1.5.0",
        "agent": {"kind": "openai-agents", "name": "release_writer", "input": "Release 1.5.0"},
    }
