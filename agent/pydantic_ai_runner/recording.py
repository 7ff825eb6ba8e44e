"""After each node of Agent.iter, in the job's thread (RunRecording, part of PydanticAIRun):
a model response recorded (its turn, tokens and the calls it asks for) and checkpointed
before its tools run (`after_model`, staged for the first call's intent), a tools node
closing the step (`after_step`, with the calls' outcomes: sent behind, collected before the
next write, agent.sdk_run.write_behind), and the checks between nodes."""

from __future__ import annotations

import time
from typing import Any

from pydantic_ai.agent import CallToolsNode, ModelRequestNode
from pydantic_ai.messages import ModelResponse

from agent.pydantic_ai_runner.constants import RESULT_MAX_CHARS, TEXT_MAX_CHARS
from agent.pydantic_ai_runner.hosted import RunHosted
from agent.pydantic_ai_runner.messages import jsonable
from harness_base.metrics import STEP_SECONDS, metric_observe
from tasks.events import EventType


class RunRecording(RunHosted):
    """The bookkeeping of each node the agent ran."""

    def after_node(self, run: Any, ran: Any, node: Any) -> None:
        """The bookkeeping of one node: a model response is checkpointed before its tools run
        (`after_model`); a tools node that leads to the next model request closes the step
        (`after_step`, the tool results included as that request)."""
        messages = list(run.all_messages())
        if isinstance(node, ModelRequestNode):
            messages.append(node.request)
        self.sdk["messages"] = self.messages_dumped(messages)
        if isinstance(ran, ModelRequestNode) and isinstance(node, CallToolsNode):
            self.record_model_response(node.model_response, run)
            # The native tools the provider ran in this turn: their rows with the response.
            # Written with the intent of the turn's first call, before the tool runs (or with
            # whatever write comes first: a pause, the end); only tools change the workspace.
            self.stage("after_model", inserts=self.hosted_record(node.model_response), rescan=False)
            self.boundary_checks(model_next=False)
        elif isinstance(ran, CallToolsNode) and isinstance(node, ModelRequestNode):
            self.state.step_index += 1
            self.state.budget.steps += 1
            self.event(EventType.STEP_FINISHED, {"step": self.state.step_index})
            self.commit(trigger="after_step", behind=True)
            now = time.monotonic()
            metric_observe(STEP_SECONDS, now - self.step_began)
            self.step_began = now
            self.boundary_checks(model_next=True)
        elif isinstance(node, ModelRequestNode):  # the first request, built from the prompt
            self.step_began = time.monotonic()
            self.boundary_checks(model_next=True)

    def record_model_response(self, response: ModelResponse, run: Any) -> None:
        self.state.model_retries = 0
        self.state.last_error = None
        usage = response.usage
        tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
        self.state.budget.tokens += tokens
        self.state.turn_index += 1
        text = "".join(
            getattr(part, "content", "") for part in response.parts if part.part_kind == "text"
        )
        self.event(
            EventType.MODEL_DECISION,
            {
                "turn": self.state.turn_index,
                "model": response.model_name or "",
                "duration_ms": round(self.turn_ms, 3),
                "prompt_tokens": usage.input_tokens or 0,
                "completion_tokens": usage.output_tokens or 0,
                "calls": [
                    {
                        "call_id": self.call_id(part.tool_call_id),
                        # The SDK's own id: a replay's model answers with it (replay).
                        "tool_call_id": part.tool_call_id,
                        "tool": part.tool_name,
                        "args": jsonable(part.args_as_dict()),
                    }
                    for part in response.tool_calls
                ],
                "final": None,
                "text": text[:TEXT_MAX_CHARS],
                # A longer answer whole (up to the result's bound), for a replay to give.
                **({"text_full": text[:RESULT_MAX_CHARS]} if len(text) > TEXT_MAX_CHARS else {}),
            },
        )
