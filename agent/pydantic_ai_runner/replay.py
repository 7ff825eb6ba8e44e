"""A Pydantic AI task replaying a saved case (RunReplay, part of PydanticAIRun; the shared
part is agent.sdk_run.replay): `replay_model`, a FunctionModel answering turn N with the
model response the case recorded for its turn N (its text and tool calls, with their ids, so
the replay's ledger ids are the recording's), and a matched call's outcome — the recorded one
(`replay_answer`: the tool does not run) or the live one checked against it
(`replay_compare`)."""

from __future__ import annotations

from typing import Any

from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.pydantic_ai_runner.tool_results import ToolCallResults
from tasks.models import ToolCall, ToolCallStatus


def _tool_call_id(call: dict[str, Any]) -> str | None:
    """The SDK's id of a recorded call (the ledger's id is `<gen>.<step>.<tool_call_id>`)."""
    if call.get("tool_call_id"):
        return str(call["tool_call_id"])
    parts = str(call.get("call_id") or "").split(".", 2)
    return parts[2] if len(parts) == 3 else None


def recorded_response(decision: dict[str, Any]) -> ModelResponse:
    """A recorded model decision as the model response it was."""
    parts: list[Any] = []
    text = decision.get("text_full") or decision.get("text") or ""
    if text:
        parts.append(TextPart(text))
    for call in decision.get("calls") or []:
        part = ToolCallPart(call.get("tool", ""), dict(call.get("args") or {}))
        tool_call_id = _tool_call_id(call)
        if tool_call_id:
            part.tool_call_id = tool_call_id
        parts.append(part)
    return ModelResponse(parts=parts)


class RunReplay(ToolCallResults):
    """A replay's model and its matched calls' outcomes."""

    def replay_model(self) -> FunctionModel:
        """The case's decisions as a model: turn N (the responses in the history, plus one)
        answers with the recorded turn N; a turn the recording lacks is the divergence."""
        replay = self.replay
        assert replay is not None

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            turn = sum(isinstance(m, ModelResponse) for m in messages) + 1
            decision = replay.decisions.get(turn)
            if decision is None:
                raise replay.diverged(
                    self,
                    call_id="",
                    tool="",
                    args={},
                    reason=(
                        f"the agent asked the model for turn {turn}; the recording has "
                        f"{len(replay.decisions)} turns"
                    ),
                )
            return recorded_response(decision)

        return FunctionModel(respond, model_name=f"replay:case {replay.case_name}"[:100])

    def replay_answer(self, *, row: ToolCall, recorded: dict[str, Any]) -> Any:
        """The recorded outcome of a call that does not run: its value, or the retry the
        model was asked for. An outcome a replay cannot give is the divergence."""
        assert self.replay is not None
        status, value = self.replay.answer(self, row=row, recorded=recorded)
        if status == ToolCallStatus.SUCCEEDED:
            self.tool_end(row=row, result=value)
            return value
        error = ModelRetry(value or "the tool failed")
        self.tool_end(row=row, error=error)
        raise error

    def replay_compare(self, *, row: ToolCall, recorded: dict[str, Any]) -> None:
        """A live call's settled outcome against the recording's."""
        assert self.replay is not None
        self.replay.compare(self, row=row, recorded=recorded)
