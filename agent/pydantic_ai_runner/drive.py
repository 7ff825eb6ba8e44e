"""Driving the agent (RunDrive, part of PydanticAIRun): Agent.iter node by node on the
agent's event loop, with the HarnessTools capability and TaskDeps; a model turn bounded by
the turn timeout, traced as a `chat` span and, when its model streams, its text on the task
page's live view as it arrives (agent.sdk_run.model_stream); each node's bookkeeping called
inline (recording; the loop runs in the job's thread: agent.sdk_run.inline)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.agent import ModelRequestNode
from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta
from pydantic_ai.models import Model
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.usage import UsageLimits
from pydantic_graph import End

from agent.pydantic_ai_runner.capability import HarnessTools
from agent.pydantic_ai_runner.deps import TaskDeps
from agent.pydantic_ai_runner.hosted import HostedGate
from agent.pydantic_ai_runner.messages import messages_load
from agent.pydantic_ai_runner.recording import RunRecording
from agent.pydantic_ai_runner.tool_calls import ToolCallHooks
from agent.runtime.attempt import TOOL_STOP_GRACE_S
from agent.runtime.run import StopRun
from agent.sdk_run.inline import inline
from agent.tracing import ModelCall, model_call
from tasks import beacon


def _model_names(model: Any) -> dict[str, Any]:
    """`gen_ai.provider.name` and the request's model of a model (or "provider:model")."""
    if isinstance(model, str):
        provider, _, name = model.rpartition(":")
        return {"provider": provider or None, "model": name}
    return {
        "provider": getattr(model, "system", None),
        "model": str(getattr(model, "model_name", "") or ""),
    }


def _chat_ended(chat: ModelCall, node: Any) -> None:
    response = getattr(node, "model_response", None)
    if response is None:
        chat.ended(input_tokens=None, output_tokens=None, finish_reason="stop")
        return
    chat.ended(
        input_tokens=response.usage.input_tokens,
        output_tokens=response.usage.output_tokens,
        finish_reason=response.finish_reason or ("tool_call" if response.tool_calls else "stop"),
        response_model=response.model_name,
    )


def _streams(model: Any) -> bool:
    """Whether `model` answers a streamed request (a FunctionModel only with its
    stream_function; a wrapper as the model it wraps)."""
    while isinstance(model, WrapperModel):
        model = model.wrapped
    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    return type(model).request_stream is not Model.request_stream


class RunDrive(RunRecording, ToolCallHooks):
    """The agent run node by node, its tool calls through the harness."""

    async def drive(
        self, agent: Any, model: Any, prompt: Any, results: DeferredToolResults | None
    ) -> tuple[Any, list[Any]]:
        """Agent.iter node by node; after each node, its bookkeeping in the job's thread."""
        history = messages_load(self.sdk["messages"]) or None
        output_type = agent.output_type
        output_types = list(output_type) if isinstance(output_type, list | tuple) else [output_type]
        if DeferredToolRequests not in output_types:
            output_types.append(DeferredToolRequests)
        async with agent.iter(
            prompt,
            message_history=history,
            deferred_tool_results=results,
            output_type=output_types,
            model=model,
            deps=self.deps(agent),
            capabilities=[HarnessTools(self), HostedGate(self)],
            # The task's budget (max_steps, max_tokens) bounds the run, checked between nodes;
            # Pydantic AI's own default of 50 requests per run would end a long task early.
            usage_limits=UsageLimits(request_limit=None),
        ) as run:
            node = run.next_node
            while not isinstance(node, End):
                ran = node
                if isinstance(ran, ModelRequestNode):
                    beacon.expect("turn", self.turn_s)
                    chat = model_call(
                        **_model_names(model or agent.model), parent=self.trace_parent
                    )
                    began = time.monotonic()
                    try:
                        node = await asyncio.wait_for(
                            self.model_request(run, ran), timeout=self.turn_s
                        )
                    except TimeoutError:
                        chat.failed("timeout", f"turn timeout: {self.turn_s:g}s exceeded")
                        raise StopRun(
                            "timeout", f"turn timeout: {self.turn_s:g}s exceeded (layer: turn)"
                        ) from None
                    except BaseException as exc:
                        chat.failed(type(exc).__name__, str(exc))
                        raise
                    _chat_ended(chat, node)
                    # The turn's time, on its model_decision (recording).
                    self.turn_ms = (time.monotonic() - began) * 1000
                else:
                    beacon.expect("tool", self.tool_s + TOOL_STOP_GRACE_S)
                    node = await run.next(ran)
                beacon.progress()
                inline(self.after_node, run, ran, node)
            return run.result.output, list(run.all_messages())

    async def model_request(self, run: Any, node: ModelRequestNode[Any, Any]) -> Any:
        """The model turn: streamed when its model streams, its text deltas on the live view
        (the node's result, and so the history and checkpoints, are the same either way)."""
        if not _streams(run.ctx.deps.model):
            return await run.next(node)
        self.model_stream.begin(turn=self.state.turn_index + 1)
        try:
            async with node.stream(run.ctx) as events:
                async for event in events:
                    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                        self.model_stream.text(event.part.content)
                    elif isinstance(event, PartDeltaEvent) and isinstance(
                        event.delta, TextPartDelta
                    ):
                        self.model_stream.text(event.delta.content_delta)
        finally:
            self.model_stream.end()
        return await run.next(node)

    def deps(self, agent: Any) -> Any:
        """TaskDeps for an agent that declares it (or declares none)."""
        if agent.deps_type in (TaskDeps, object, type(None)):
            return TaskDeps(workspace=self.workspace, task_id=str(self.task_id))
        return None
