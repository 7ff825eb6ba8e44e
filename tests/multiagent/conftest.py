"""Multi-agent groups on the real parts: the durable-execution fleet (rqworkers and a sweeper
on fast clocks, test tools, this test's harness.yaml) and specs with sub-agents."""

from __future__ import annotations

from typing import Any

from tests.durable.conftest import durable_settings, fleet, harness_config_text  # noqa: F401


def scripted(*turns: dict) -> dict[str, Any]:
    return {"kind": "scripted", "script": list(turns)}


def agent(*turns: dict, tools: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"model": scripted(*turns), "tools": tools or [], **extra}


def delegate(agent_name: str, goal: str, **inputs: Any) -> dict[str, Any]:
    return {"call": "delegate", "args": {"agent": agent_name, "goal": goal, "inputs": inputs}}


def group_spec(*turns: dict, agents: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "title": extra.pop("title", "group"),
        "goal": extra.pop("goal", "split the work between the sub-agents"),
        "model": scripted(*turns),
        "agents": agents,
        **extra,
    }
