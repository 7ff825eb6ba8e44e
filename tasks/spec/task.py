"""TaskSpec itself, and the sub-agents a task may delegate to."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from tasks.spec.agents import AgentKindSpec
from tasks.spec.base import SpecModel
from tasks.spec.budget import BudgetSpec, RetrySpec
from tasks.spec.model import ModelSpec
from tasks.spec.sections import ChecksSpec, ContextSpec, ReviewOverride, WorkspaceSpec

DELEGATE_TOOL = "delegate"
# Sub-agent names: what the model writes in `delegate {agent}`.
AGENT_NAME = r"^[a-z][a-z0-9_-]{0,62}$"


class AgentSpec(SpecModel):
    """A named sub-agent a task may delegate to (`delegate {agent, goal, inputs}`): each
    delegation starts a child task with this model, tools, budget and review overrides."""

    model: ModelSpec
    tools: list[str] = Field(default_factory=list, max_length=200)
    # Capped by what the parent has left when the child starts.
    budget: BudgetSpec | None = None
    review: ReviewOverride | None = None
    system_prompt: str | None = Field(default=None, max_length=50_000)
    # The child's goal; `{goal}` and `{inputs}` are replaced by the delegate call's goal and
    # inputs (JSON). Unset: the goal, then the inputs.
    goal_template: str | None = Field(default=None, max_length=10_000)

    @field_validator("tools")
    @classmethod
    def _no_nesting(cls, tools: list[str]) -> list[str]:
        if DELEGATE_TOOL in tools:
            raise ValueError("sub-agents cannot delegate further")
        return tools


class TaskSpec(SpecModel):
    title: str = Field(min_length=1, max_length=200)
    goal: str = Field(min_length=1, max_length=100_000)
    priority: Literal["high", "default", "low"] = "default"
    # Exactly one: the harness's loop driven by `model`, or a registered graph (`agent`).
    model: ModelSpec | None = None
    agent: AgentKindSpec | None = None
    tools: list[str] = Field(default_factory=list, max_length=200)
    workspace: WorkspaceSpec = Field(default_factory=WorkspaceSpec)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    review: ReviewOverride | None = None
    retry: RetrySpec | None = None
    recovery: dict[str, Literal["rollback", "retry", "forward", "auto"]] = Field(
        default_factory=dict
    )
    system_prompt: str | None = Field(default=None, max_length=50_000)
    context: ContextSpec | None = None
    checks: ChecksSpec | None = None
    # Sub-agents this task may delegate to; setting any makes the `delegate` tool available.
    agents: dict[Annotated[str, Field(pattern=AGENT_NAME)], AgentSpec] | None = Field(
        default=None, max_length=20
    )
    # A directory every agent of the group sees (multiagent/shared.py): `/shared/...` paths in
    # the file tools, mounted at /shared in the command sandbox. Only with `agents`.
    shared: bool = False
    # "plan": a dry run first (agent.runtime.plan): side effects become the items of one
    # `plan` review, and the approved plan binds the execution run. Unset: an ordinary run.
    mode: Literal["run", "plan"] | None = None

    @model_validator(mode="after")
    def _model_or_agent(self) -> TaskSpec:
        if (self.model is None) == (self.agent is None):
            raise ValueError("give exactly one of 'model' (the harness loop) or 'agent' (a graph)")
        if self.mode == "plan" and (self.agent is not None or self.agents):
            raise ValueError("mode 'plan' needs the harness loop (`model`) without sub-agents")
        return self

    @model_validator(mode="after")
    def _delegate_tool(self) -> TaskSpec:
        if self.agents and self.agent is not None:
            raise ValueError("sub-agents (`agents`) need the harness loop (`model`), not a graph")
        if self.agents:
            if DELEGATE_TOOL not in self.tools:
                self.tools = [*self.tools, DELEGATE_TOOL]
        elif DELEGATE_TOOL in self.tools:
            raise ValueError("the delegate tool needs `agents` to delegate to")
        if self.shared and not self.agents:
            raise ValueError("`shared` (a directory the group shares) needs `agents`")
        return self
