"""What an OpenAI Agents SDK task's `versions` hash (agent.versions): the definition of its
agent and of every agent its handoffs reach - instructions, tools with their argument schemas,
output type, handoffs - and the function tools' argument schemas on their own."""

from __future__ import annotations

from typing import Any

from agents import Agent, FunctionTool, Handoff

from agent.sdk_run.code import version_parts_described
from agent.versions import described, type_schema


def _handoff_target(handoff: Any) -> tuple[str, Agent | None]:
    if isinstance(handoff, Agent):
        return handoff.name, handoff
    if isinstance(handoff, Handoff):
        return handoff.agent_name, None
    return str(described(handoff)), None


def _tool_schema(tool: Any) -> Any:
    return tool.params_json_schema if isinstance(tool, FunctionTool) else {}


def agent_version_parts(*, spec: dict[str, Any], agent: Agent) -> dict[str, Any]:
    """The keyword arguments of agent.versions.versions_build for this SDK's task."""
    return version_parts_described(_agent_version_parts, spec=spec, agent=agent)


def _agent_version_parts(*, spec: dict[str, Any], agent: Agent) -> dict[str, Any]:
    agents: dict[str, Any] = {}
    tools: dict[str, Any] = {}
    todo = [agent]
    while todo:
        current = todo.pop()
        if current.name in agents:
            continue
        own = {tool.name: _tool_schema(tool) for tool in current.tools}
        tools.update(own)
        handoffs = []
        for handoff in current.handoffs:
            name, target = _handoff_target(handoff)
            handoffs.append(name)
            if target is not None:
                todo.append(target)
        agents[current.name] = {
            "instructions": described(current.instructions),
            "tools": own,
            "output": type_schema(current.output_type),
            "handoffs": handoffs,
            "mcp_servers": sorted(str(getattr(s, "name", "")) for s in current.mcp_servers),
        }
    return {"spec": spec, "tools": tools, "agent": {"start": agent.name, "agents": agents}}
