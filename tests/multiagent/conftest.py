"""Multi-agent groups on the real parts: the durable-execution fleet (rqworkers and a sweeper
on fast clocks, test tools, this test's harness.yaml) and specs with sub-agents."""

from __future__ import annotations

from typing import Any

from tasks.models import Task
from tests.durable.conftest import durable_settings, fleet, harness_config_text  # noqa: F401
from tests.factories import scripted_model as scripted


def agent(*turns: dict, tools: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"model": scripted(*turns), "tools": tools or [], **extra}


def delegate(agent_name: str, goal: str, **inputs: Any) -> dict[str, Any]:
    return {"call": "delegate", "args": {"agent": agent_name, "goal": goal, "inputs": inputs}}


def stepper(name: str, seconds: float) -> dict[str, Any]:
    """A sub-agent that writes `a.txt` = 1, sleeps `seconds` (a cut or a crash comes
    meanwhile), writes 2 and answers."""
    return agent(
        {"call": "write_file", "args": {"path": "a.txt", "content": f"{name} 1"}},
        {"call": "sleep", "args": {"seconds": seconds}},
        {"call": "write_file", "args": {"path": "a.txt", "content": f"{name} 2"}},
        {"final": f"{name} done"},
        tools=["write_file", "sleep"],
    )


def group_spec(*turns: dict, agents: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "title": extra.pop("title", "group"),
        "goal": extra.pop("goal", "split the work between the sub-agents"),
        "model": scripted(*turns),
        "agents": agents,
        **extra,
    }


def all_sleeping(task_ids) -> bool:
    """Whether every one of the tasks has decided to call `sleep` (and so is in it, or past)."""
    return all(
        Task.objects.get(id=task_id)
        .events.filter(type="model_decision", payload__calls__0__tool="sleep")
        .exists()
        for task_id in task_ids
    )
