"""Native (hosted) tools of a Pydantic AI agent (RunHosted, part of PydanticAIRun; the shared
part is agent.sdk_run.hosted): WebSearchTool, CodeExecutionTool, WebFetchTool,
ImageGenerationTool, FileSearchTool, … run by the model's provider inside the model's turn.

HostedGate, a capability, stands before each model request (`before_model_request`): the
native tools the request would offer are decided by their kind (`web_search`, …, the name
their calls carry): a tool a rule reviews is not sent until a person allowed this turn to use
it (the task pauses before the model is asked), a denied or rejected one is left out of the
request. Each model response's NativeToolCallPart / NativeToolReturnPart pair is then a
ledger row with the call's arguments and its result (`hosted_record`)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, NoReturn

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse

from agent.pydantic_ai_runner.constants import KIND, REVIEW_KIND
from agent.pydantic_ai_runner.endings import RunEndings
from agent.pydantic_ai_runner.messages import jsonable
from agent.sdk_run.hosted import HostedTurn, hosted_call_record, hosted_turn
from agent.sdk_run.inline import inline
from agent.versions import versions_current
from review.services.transitions import review_request_open
from tasks.events import EventType
from tasks.models import ToolCall

HOSTED_DECISIONS = ["approve", "reject"]


def _config(tool: Any) -> Any:
    fields = getattr(tool, "__dataclass_fields__", {})
    return jsonable({name: getattr(tool, name, None) for name in fields})


class RunHosted(RunEndings):
    """PydanticAIRun's native tools: hosted_gate (before a model request), hosted_record."""

    def hosted_gate(self, native: list[Any]) -> list[Any]:
        """The native tools this model request may send, as the rules and the people's
        decisions on this turn allow; one waiting for a person pauses the task (Paused) before
        the model is asked."""
        turn = hosted_turn(
            self,
            tools={tool.kind: _config(tool) for tool in native},
            agent=str(getattr(self.spec.agent, self.NAME_KEY)),
            call_id=self.call_id,
            spec=self.task.spec,
        )
        if turn.waiting:
            self.hosted_pause(turn)
        return [tool for tool in native if tool.kind in turn.offered]

    def hosted_pause(self, turn: HostedTurn) -> NoReturn:
        fresh = [row for row, _d, _w in turn.waiting if row in turn.new]
        for row, _decision, why in turn.waiting:
            if row in fresh:
                self.event(
                    EventType.REVIEW_REQUESTED,
                    {"call_id": row.call_id, "tool": row.tool, "why": why},
                )

        def open_reviews(checkpoint: Any) -> None:
            turn.reopen(self, kind=REVIEW_KIND, checkpoint_id=checkpoint.id if checkpoint else None)
            for row, decision, why in turn.waiting:
                if row not in fresh:
                    continue
                review_request_open(
                    tool_call=row,
                    checkpoint_id=checkpoint.id if checkpoint else None,
                    decision=dataclasses.replace(
                        decision, action="review", reason=(decision.reason or why)[:200]
                    ),
                    preview=json.dumps(row.arguments, indent=2, ensure_ascii=False, default=str),
                    kind=REVIEW_KIND,
                    interrupt={
                        "mode": "hosted_turn",
                        "sdk": KIND,
                        "allowed": HOSTED_DECISIONS,
                        "hosted": row.tool,
                    },
                    versions=versions_current(self),
                )

        self.pause(
            reason=f"approval needed: hosted tool {turn.waiting[0][0].tool}",
            trigger="before_review",
            inserts=fresh,
            updates=[(row, ["status"]) for row in turn.reasked],
            then=open_reviews,
        )

    def hosted_record(self, response: ModelResponse) -> list[ToolCall]:
        """The rows (unsaved) of the native tool calls the response holds, with their
        results."""
        returns = {
            part.tool_call_id: part
            for part in response.parts
            if part.part_kind == "builtin-tool-return"
        }
        rows = []
        for part in response.parts:
            if part.part_kind != "builtin-tool-call":
                continue
            answer = returns.get(part.tool_call_id)
            row = hosted_call_record(
                self,
                call_id=self.call_id(part.tool_call_id),
                tool=part.tool_name,
                arguments=jsonable(part.args_as_dict()),
                result=jsonable(answer.content) if answer is not None else None,
                error="" if answer is not None else "the provider returned no result",
            )
            if row is not None:
                rows.append(row)
        return rows


@dataclass(init=False)
class HostedGate(AbstractCapability):
    """Every model request of the agent through the harness's gate for native tools."""

    def __init__(self, run: RunHosted) -> None:
        self.run = run

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        parameters = request_context.model_request_parameters
        native = list(parameters.native_tools)
        if not native:
            return request_context
        offered = inline(self.run.hosted_gate, native)
        if len(offered) == len(native):
            return request_context
        return dataclasses.replace(
            request_context,
            model_request_parameters=dataclasses.replace(parameters, native_tools=offered),
        )
