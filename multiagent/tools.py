"""The built-in `delegate` tool (available to tasks whose spec declares `agents`).

The loop runs delegate calls itself (multiagent.delegation via the runtime's delegation hook):
every delegate call of a turn starts its child task at once, the parent waits without a
worker, and each child's final answer (or failure) becomes that call's result. The function
below only runs for a call the loop could not start, to tell the model why."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.models import Task
from tasks.spec import DELEGATE_TOOL
from tasks.tools.registry import PermanentToolError, ToolContext, tool


class DelegateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, max_length=63, description="a sub-agent of this task")
    goal: str = Field(min_length=1, max_length=20_000, description="what the sub-agent must do")
    inputs: dict[str, Any] = Field(
        default_factory=dict, description="data the sub-agent needs (JSON)"
    )


@tool(name=DELEGATE_TOOL, risk="write", side_effect=True, idempotent=True, timeout_s=30)
def delegate(ctx: ToolContext, args: DelegateArgs) -> dict:
    """Hand a sub-task to one of this task's sub-agents: {agent, goal, inputs}. Several
    delegate calls in one turn run in parallel; each returns that sub-agent's final answer."""
    agents = (Task.objects.values_list("spec", flat=True).get(id=ctx.task_id) or {}).get(
        "agents"
    ) or {}
    if args.agent not in agents:
        known = ", ".join(sorted(agents)) or "(none)"
        raise PermanentToolError(f"unknown agent {args.agent!r}; this task's agents: {known}")
    raise PermanentToolError(f"the delegation to {args.agent!r} could not be started")
