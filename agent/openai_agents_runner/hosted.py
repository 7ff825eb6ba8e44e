"""Hosted tools of an OpenAI Agents SDK agent (HostedTools, part of AgentsRun; the shared
part is agent.sdk_run.hosted): WebSearchTool, FileSearchTool, CodeInterpreterTool,
ImageGenerationTool and any other tool that is neither a function tool nor a hosted MCP tool.

The provider runs a hosted call inside the model's turn, so the gate stands in front of the
model: an agent with hosted tools gets its model wrapped (HostedGateModel). Before each model
call the hosted tools in the request are decided by name (hosted_turn): a tool a rule reviews
is not sent until a person allowed this turn to use it (the task pauses before the model is
asked), a denied or rejected one is left out of the request. After the call, each hosted call
item of the response (`web_search_call`, `file_search_call`, `code_interpreter_call`,
`image_generation_call`) is a ledger row with its inputs and its result."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

from agents import FunctionTool, HostedMCPTool, Model

from agent.openai_agents_runner.model_wrap import WrappedModel
from agent.openai_agents_runner.reviews import ReviewPauses
from agent.openai_agents_runner.values import jsonable
from agent.sdk_run.hosted import hosted_call_record, hosted_turn
from agent.sdk_run.inline import inline

# A hosted call's output item type -> (its tool's name, the item's fields that are its inputs;
# the others but id and type are its result).
_CALLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "web_search_call": ("web_search", ("action",)),
    "file_search_call": ("file_search", ("queries",)),
    "code_interpreter_call": ("code_interpreter", ("code", "container_id")),
    "image_generation_call": ("image_generation", ("action", "background", "output_format")),
}
_FAILED = ("failed", "incomplete")


def is_hosted(tool: Any) -> bool:
    """A tool the SDK does not run through a function (the harness's wrapper) nor asks
    approval for (a hosted MCP tool's calls are approval requests)."""
    return not isinstance(tool, (FunctionTool, HostedMCPTool))


def _config(tool: Any) -> Any:
    config = getattr(tool, "tool_config", None)
    if config is None:
        fields = getattr(tool, "__dataclass_fields__", {})
        config = {name: getattr(tool, name, None) for name in fields if not name.startswith("_")}
    return jsonable(config)


def hosted_call_of(item: Any) -> tuple[str, str, dict[str, Any], Any, str] | None:
    """(its id, tool, arguments, result, error) of a response's hosted call item, or None."""
    dump = getattr(item, "model_dump", None)
    data = dump(mode="json", exclude_none=True) if dump else item
    if not isinstance(data, dict) or data.get("type") not in _CALLS:
        return None
    tool, inputs = _CALLS[data["type"]]
    arguments = {key: data[key] for key in inputs if key in data}
    result = {k: v for k, v in data.items() if k not in (*inputs, "id", "type")}
    if isinstance(arguments.get("action"), dict) and "sources" in arguments["action"]:
        arguments["action"] = dict(arguments["action"])
        result["sources"] = arguments["action"].pop("sources")
    if isinstance(result.get("result"), str):  # an image, base64: named by its digest
        image = result.pop("result")
        result["image"] = {
            "base64_chars": len(image),
            "sha256": hashlib.sha256(image.encode()).hexdigest(),
        }
    status = str(data.get("status") or "")
    error = f"the provider reported the call {status}" if status in _FAILED else ""
    if error and isinstance(data.get("error"), dict):
        error += f": {data['error'].get('message', '')}"
    return str(data.get("id") or ""), tool, arguments, jsonable(result), error


class HostedTools(ReviewPauses):
    """AgentsRun's hosted tools: hosted_gate (before a model call), hosted_record (after)."""

    def hosted_gate(self, tools: list[Any]) -> list[Any]:
        """The tools this model call may send: hosted ones as the rules and the people's
        decisions on this turn allow. A hosted tool waiting for a person pauses the task
        (Paused) before the model is asked."""
        hosted = {tool.name: _config(tool) for tool in tools if is_hosted(tool)}
        if not hosted:
            return tools
        turn = hosted_turn(
            self, tools=hosted, agent=self.turn_agent, call_id=self.call_id, spec=self.task.spec
        )
        if turn.waiting:
            self.pause_for_reviews(turn.waiting, hosted=turn)
        return [tool for tool in tools if not is_hosted(tool) or tool.name in turn.offered]

    def hosted_record(self, response: Any) -> None:
        """Each hosted call of the model's response, a ledger row (written with the turn)."""
        for item in getattr(response, "output", None) or []:
            found = hosted_call_of(item)
            if found is None:
                continue
            sdk_id, tool, arguments, result, error = found
            row = hosted_call_record(
                self,
                call_id=self.call_id(sdk_id or f"{tool}{self.state.step_index}"),
                tool=tool,
                arguments=arguments,
                result=result,
                error=error,
            )
            if row is not None:
                self.pending_rows[row.call_id] = row


class HostedGateModel(WrappedModel):
    """The agent's model behind the harness's gate for hosted tools (HostedTools)."""

    def __init__(self, run: HostedTools, inner: Model) -> None:
        super().__init__(inner)
        self.run = run

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        tools = inline(self.run.hosted_gate, list(tools))
        response = await self.inner.get_response(
            system_instructions, input, model_settings, tools, *args, **kwargs
        )
        self.run.hosted_record(response)
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        tools = inline(self.run.hosted_gate, list(tools))
        events = self.inner.stream_response(
            system_instructions, input, model_settings, tools, *args, **kwargs
        )
        async for event in events:
            yield event
