"""The agent's model as the harness calls it (HarnessModel, wrapped around every model of the
agent graph by AgentWrapping): the SDK still calls `get_response` (Runner.run: the run loop,
its checkpoints and ledger are unchanged), but the wrapper asks the model for a streamed
response when it has one, puts its text deltas on the task page's live view
(agent.sdk_run.model_stream) and hands the SDK the completed response. A model without
`stream_response` (NotImplementedError) answers `get_response` as before.

It also carries the context alignment after a recovery (agent.sdk_run.alignment): the
summary of what was undone, as a user message at the point of the history where the agent
resumed, in every request from the first one after the recovery on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from agents import Model, ModelResponse, Usage
from agents.exceptions import ModelBehaviorError

from agent.openai_agents_runner.model_wrap import WrappedModel
from agent.sdk_run.model_stream import ModelStream


class StreamingRun(Protocol):
    model_stream: ModelStream

    def turn_next(self) -> int: ...

    def aligned(self, input: str | list[Any]) -> str | list[Any]: ...

    def turn_replayed(self) -> ModelResponse | None: ...

    def turn_recorded(self, response: ModelResponse) -> None: ...


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(requests=1)
    details = {
        name: getattr(usage, name)
        for name in ("input_tokens_details", "output_tokens_details")
        if getattr(usage, name, None) is not None
    }
    return Usage(
        requests=1,
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        total_tokens=usage.total_tokens or 0,
        **details,
    )


async def _completed(events: AsyncIterator[Any], stream: ModelStream) -> ModelResponse | None:
    """The response a stream completes with, its text deltas on the live view as they come.
    None: the model does not stream (NotImplementedError before its first event, or an
    empty stream: asked again without it)."""
    done_items: list[Any] = []
    final: Any = None
    seen = False
    try:
        async for event in events:
            seen = True
            kind = getattr(event, "type", "")
            if kind == "response.output_text.delta":
                stream.text(str(getattr(event, "delta", "") or ""))
            elif kind == "response.output_item.done":
                done_items.append(event.item)
            elif kind == "response.completed":
                final = event.response
            elif kind in ("response.incomplete", "response.failed", "error", "response.error"):
                raise ModelBehaviorError(f"the model's stream ended with {kind}")
    except NotImplementedError:
        if seen:
            raise
        return None
    if final is None:
        raise ModelBehaviorError("Model did not produce a final response!")
    output = list(final.output or done_items)
    if not output and not stream.written():
        # An endpoint that ignores `stream` answers with a body no event is parsed from.
        return None
    return ModelResponse(
        output=output,
        usage=_usage(getattr(final, "usage", None)),
        response_id=getattr(final, "id", None),
        request_id=getattr(final, "_request_id", None),
    )


class HarnessModel(WrappedModel):
    """`inner`, streamed to the live view and aligned after a recovery."""

    def __init__(self, inner: Model, run: StreamingRun) -> None:
        super().__init__(inner)
        self.run = run
        # False once the model showed it does not stream: asked with get_response from then on.
        self.streams = True

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        replayed = self.run.turn_replayed()
        if replayed is not None:
            return replayed  # a turn the run made before it resumed (turns.RecordedTurns)
        response = await self.response(system_instructions, input, *args, **kwargs)
        self.run.turn_recorded(response)
        return response

    async def response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        input = self.run.aligned(input)
        stream = self.run.model_stream
        stream.begin(turn=self.run.turn_next())
        response = None
        try:
            if self.streams:
                try:
                    events = self.inner.stream_response(system_instructions, input, *args, **kwargs)
                except NotImplementedError:
                    events = None
                response = await _completed(events, stream) if events is not None else None
        finally:
            stream.end()
        if response is None:
            self.streams = False
            return await self.inner.get_response(system_instructions, input, *args, **kwargs)
        return response

    def stream_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return self.inner.stream_response(
            system_instructions, self.run.aligned(input), *args, **kwargs
        )
