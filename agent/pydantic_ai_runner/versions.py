"""What a Pydantic AI task's `versions` hash (agent.versions): the agent's definition -
instructions and system prompts, its function tools with their argument schemas, its output
type - and the tools' argument schemas on their own."""

from __future__ import annotations

from typing import Any

from pydantic_ai.toolsets import FunctionToolset

from agent.sdk_run.code import version_parts_described
from agent.versions import described, type_schema


def agent_tool_schemas(agent: Any) -> dict[str, Any]:
    return {
        name: tool.function_schema.json_schema
        for toolset in agent.toolsets
        if isinstance(toolset, FunctionToolset)
        for name, tool in toolset.tools.items()
    }


def agent_version_parts(*, spec: dict[str, Any], agent: Any) -> dict[str, Any]:
    """The keyword arguments of agent.versions.versions_build for this SDK's task."""
    return version_parts_described(_agent_version_parts, spec=spec, agent=agent)


def _agent_version_parts(*, spec: dict[str, Any], agent: Any) -> dict[str, Any]:
    instructions = [
        described(getattr(i, "instruction", i)) for i in getattr(agent, "_instructions", None) or []
    ]
    tools = agent_tool_schemas(agent)
    definition = {
        "name": agent.name,
        "instructions": instructions,
        "system_prompts": described(list(getattr(agent, "_system_prompts", ()))),
        "tools": tools,
        "output": type_schema(agent.output_type),
        "handoffs": [],
    }
    return {"spec": spec, "tools": tools, "agent": definition}
