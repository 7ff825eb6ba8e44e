"""SDK agents for the streaming and alignment tests (tests/durable/test_sdk_streaming.py,
test_sdk_alignment.py), no network:

- `pai_streamer` / `oa_streamer`: one model turn that streams STREAMED, then waits until the
  test releases it (a file appears: `release(...)`), then ends with a final answer.
- `pai_aligned` / `oa_aligned`: two file writes, then an answer; every model request's
  `[harness]` messages (the context alignment) are recorded, so a test reads what the model
  was told after a rollback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent
from django.conf import settings
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic_ai import Agent as PaiAgent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.pydantic_ai_runner import TaskDeps
from examples.openai_agents_agent import ScriptedTurns
from tests.durable.openai_agents import log_path, write_file
from tests.durable.pai_agents import mark, task_input, turns
from tests.durable.pai_agents import write as pai_write

STREAMED = ["Drafting ", "the release ", "notes: ", "step one"]
FINAL = "; all done."
RELEASE_WAIT_S = 60
ALIGNMENT_MARK = "[harness]"


def release(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("go\n")


async def _released(path: Path) -> None:
    """Wait for the test's go (a condition, bounded), never a fixed sleep."""
    deadline = time.monotonic() + RELEASE_WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"never released: {path}")
        await asyncio.sleep(0.05)


# --- Pydantic AI ------------------------------------------------------------------------------


def _marker(messages: list[ModelMessage]) -> Path:
    return Path(task_input(messages)["marker_dir"])


def _pai_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("".join(STREAMED) + FINAL)])


async def _pai_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    for chunk in STREAMED:
        yield chunk
    mark(messages, "model:streamed")
    await _released(_marker(messages) / "release")
    yield FINAL


pai_streamer = PaiAgent(FunctionModel(_pai_answer, stream_function=_pai_stream), deps_type=TaskDeps)


def _pai_told(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind == "user-prompt" and ALIGNMENT_MARK in str(part.content)
    ]


def _pai_aligned_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = turns(messages)
    with open(_marker(messages) / "requests.jsonl", "a") as out:
        out.write(json.dumps({"turn": step, "told": _pai_told(messages)}) + "\n")
    if step == 0:
        return ModelResponse(parts=[ToolCallPart("write", {"path": "a.txt", "text": "a1"})])
    if step == 1:
        return ModelResponse(parts=[ToolCallPart("write", {"path": "b.txt", "text": "b1"})])
    return ModelResponse(parts=[TextPart(f"done after {step} writes")])


pai_aligned = PaiAgent(FunctionModel(_pai_aligned_model), deps_type=TaskDeps)
pai_aligned.tool(pai_write)


def pai_requests(marker_dir: Path) -> list[dict[str, Any]]:
    path = marker_dir / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# --- OpenAI Agents SDK ------------------------------------------------------------------------


def _key(items: list[Any]) -> str:
    """The test's key, from the first user message ("task <key>: ...")."""
    first = items[0] if items else {}
    content = first.get("content") if isinstance(first, dict) else ""
    return str(content).split(":", 1)[0].removeprefix("task ").strip()


def oa_release_path(key: str) -> Path:
    return Path(settings.HARNESS_LEDGER_DIR) / f"{key}.release"


class StreamingTurns(ScriptedTurns):
    """Streams STREAMED, waits for its release, then completes with the whole answer."""

    async def stream_response(  # type: ignore[override]
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        response = await self.get_response(system_instructions, input, *args, **kwargs)
        for number, chunk in enumerate(STREAMED):
            yield ResponseTextDeltaEvent.model_construct(
                type="response.output_text.delta", delta=chunk, sequence_number=number
            )
        _record(_key(items), "model:streamed")
        await _released(oa_release_path(_key(items)))
        yield ResponseTextDeltaEvent.model_construct(
            type="response.output_text.delta", delta=FINAL, sequence_number=len(STREAMED)
        )
        usage = response.usage
        completed = Response.model_construct(
            id="streamed",
            output=response.output,
            usage=ResponseUsage.model_construct(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.total_tokens,
                input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            ),
        )
        yield ResponseCompletedEvent.model_construct(
            type="response.completed", response=completed, sequence_number=len(STREAMED) + 1
        )


def _record(key: str, line: str) -> None:
    path = log_path(key, "model")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(line + "\n")


def oa_streamer() -> Agent:
    return Agent(
        name="streamer",
        instructions="Draft the notes.",
        model=StreamingTurns(["".join(STREAMED) + FINAL]),
    )


class RecordingTurns(ScriptedTurns):
    """Records, per request, the `[harness]` user messages it was given."""

    def before_turn(self, turn: int, items: list[Any]) -> None:
        told = [
            str(item.get("content"))
            for item in items
            if isinstance(item, dict)
            and item.get("role") == "user"
            and ALIGNMENT_MARK in str(item.get("content"))
        ]
        path = log_path(_key(items), "requests")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(json.dumps({"turn": turn, "told": told}) + "\n")


def oa_aligned() -> Agent:
    return Agent(
        name="aligned",
        instructions="Write two files.",
        tools=[write_file],
        model=RecordingTurns(
            [
                [("write_file", {"path": "a.txt", "text": "one\n"})],
                [("write_file", {"path": "b.txt", "text": "two\n"})],
                "done",
            ]
        ),
    )


def oa_requests(key: str) -> list[dict[str, Any]]:
    path = log_path(key, "requests")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
