"""The loop's spans, named and attributed as the OpenTelemetry GenAI semantic conventions say:
`chat {model}` per model call and `execute_tool {tool}` per tool attempt, inside the run
segment's `invoke_agent` span (tasks/tracing.py). Message contents (the messages sent, the
answer, tool arguments and results) are recorded only when
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. While traces are off every helper
yields None and costs a function call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent.llm import ModelDecision
from harness_base import telemetry
from tasks.agent_state import AgentState

# A message's parts are cut here on spans (a backend refuses huge attributes).
CONTENT_MAX_CHARS = 4000


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text[:CONTENT_MAX_CHARS]}


def _input_messages(state: AgentState) -> str:
    messages = []
    for message in state.messages:
        parts: list[dict[str, Any]]
        if message.role == "tool":
            parts = [
                {
                    "type": "tool_call_response",
                    "id": message.call_id,
                    "response": message.content[:CONTENT_MAX_CHARS],
                }
            ]
        else:
            parts = [_text_part(message.content)] if message.content else []
            parts += [
                {"type": "tool_call", "id": c.call_id, "name": c.tool, "arguments": c.args}
                for c in message.calls or []
            ]
        messages.append({"role": message.role, "parts": parts})
    return json.dumps(messages, ensure_ascii=False, default=str)


def _output_messages(decision: ModelDecision, finish_reason: str) -> str:
    parts = [_text_part(decision.text)] if decision.text else []
    if decision.final is not None:
        parts.append(_text_part(decision.final))
    parts += [{"type": "tool_call", "name": c.tool, "arguments": c.args} for c in decision.calls]
    return json.dumps(
        [{"role": "assistant", "parts": parts, "finish_reason": finish_reason}],
        ensure_ascii=False,
        default=str,
    )


class ChatSpan:
    def __init__(self, span: Any, state: AgentState) -> None:
        self.span = span
        if span is not None and telemetry.capture_content():
            telemetry.set_attributes(span, {"gen_ai.input.messages": _input_messages(state)})

    def decided(self, decision: ModelDecision, usage: dict[str, Any]) -> None:
        if self.span is None:
            return
        finish_reason = "tool_calls" if decision.calls else "stop"
        telemetry.set_attributes(
            self.span,
            {
                "gen_ai.response.model": usage.get("model"),
                "gen_ai.usage.input_tokens": usage.get("prompt_tokens"),
                "gen_ai.usage.output_tokens": usage.get("completion_tokens"),
                "gen_ai.response.finish_reasons": [finish_reason],
            },
        )
        if telemetry.capture_content():
            telemetry.set_attributes(
                self.span, {"gen_ai.output.messages": _output_messages(decision, finish_reason)}
            )

    def failed(self, error_class: str, message: str) -> None:
        telemetry.set_error(self.span, error_class, message)


@contextmanager
def chat_span(*, provider: str, model: str, state: AgentState) -> Iterator[ChatSpan]:
    """One model call: `chat {model}`."""
    if not telemetry.enabled():
        yield ChatSpan(None, state)
        return
    with telemetry.span(
        f"chat {model}",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
        },
    ) as span:
        yield ChatSpan(span, state)


class ToolSpan:
    def __init__(self, span: Any) -> None:
        self.span = span

    def finished(self, *, status: str, error_class: str, error_message: str, result: Any) -> None:
        if self.span is None:
            return
        telemetry.set_attributes(self.span, {"harness.tool.status": status})
        if error_class:
            telemetry.set_error(self.span, error_class, error_message)
        elif telemetry.capture_content():
            telemetry.set_attributes(
                self.span,
                {
                    "gen_ai.tool.call.result": json.dumps(result, ensure_ascii=False, default=str)[
                        :CONTENT_MAX_CHARS
                    ]
                },
            )

    def end(self, *, end_ns: int | None = None) -> None:
        telemetry.end_span(self.span, end_ns=end_ns)


@contextmanager
def tool_span(
    *,
    tool: str,
    call_id: str,
    attempt: int,
    arguments: Any,
    parent: tuple[int, int] | None = None,
) -> Iterator[ToolSpan]:
    """One attempt of a tool call: `execute_tool {tool}`; `gen_ai.tool.call.id` is the call's
    idempotency key (the same on every attempt). `parent`: the segment's span
    (`telemetry.current_parent()`) when the tool runs in a framework's event loop."""
    if not telemetry.enabled():
        yield ToolSpan(None)
        return
    with telemetry.span(
        f"execute_tool {tool}",
        attributes=_tool_attributes(tool, call_id, attempt, arguments),
        parent=parent,
    ) as span:
        yield ToolSpan(span)


def tool_started(
    *,
    tool: str,
    call_id: str,
    attempt: int,
    arguments: Any,
    parent: tuple[int, int] | None = None,
    start_ns: int | None = None,
) -> ToolSpan:
    """`tool_span` for a tool attempt seen after the fact (a LangGraph tools node): the
    caller ends it (`ToolSpan.end`)."""
    if not telemetry.enabled():
        return ToolSpan(None)
    return ToolSpan(
        telemetry.start_span(
            f"execute_tool {tool}",
            attributes=_tool_attributes(tool, call_id, attempt, arguments),
            parent=parent,
            start_ns=start_ns,
        )
    )


def _tool_attributes(tool: str, call_id: str, attempt: int, arguments: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "harness.tool.attempt": attempt,
    }
    if telemetry.capture_content():
        attributes["gen_ai.tool.call.arguments"] = json.dumps(
            arguments, ensure_ascii=False, default=str
        )[:CONTENT_MAX_CHARS]
    return attributes


class ModelCall:
    """A model call a framework made (OpenAI Agents SDK, Pydantic AI, a LangGraph node), not
    the harness's loop: `chat {model}` started and ended by the runner, with what the
    framework reports of it (no message contents: the framework holds them)."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def ended(
        self,
        *,
        input_tokens: int | None,
        output_tokens: int | None,
        finish_reason: str,
        response_model: str | None = None,
        end_ns: int | None = None,
    ) -> None:
        if self.span is None:
            return
        telemetry.set_attributes(
            self.span,
            {
                "gen_ai.response.model": response_model or None,
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
                "gen_ai.response.finish_reasons": [finish_reason],
            },
        )
        telemetry.end_span(self.span, end_ns=end_ns)
        self.span = None

    def failed(self, error_type: str, message: str = "") -> None:
        if self.span is None:
            return
        telemetry.set_error(self.span, error_type, message)
        telemetry.end_span(self.span)
        self.span = None


def model_call(
    *,
    provider: str | None,
    model: str,
    parent: tuple[int, int] | None = None,
    start_ns: int | None = None,
) -> ModelCall:
    """A framework's model call starts (`start_ns`: it started earlier, seen after the fact)."""
    if not telemetry.enabled():
        return ModelCall(None)
    return ModelCall(
        telemetry.start_span(
            f"chat {model}" if model else "chat",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider or None,
                "gen_ai.request.model": model or None,
            },
            parent=parent,
            start_ns=start_ns,
        )
    )
