"""TaskSpec: the validated body of `POST /api/v1/tasks` (DESIGN §6). Secrets are named by the
environment variable that holds them, never stored in a spec. One module per part of the spec,
each importing only the modules listed below it:

    task      TaskSpec itself, and the sub-agents (AgentSpec) a task may delegate to
    sections  the workspace's files, review overrides, context and checks
    budget    the budget in force, the retry policy, what a retry may change (RetryChanges)
    agents    registered agents run instead of the loop (LangGraph, Pydantic AI, OpenAI Agents)
    model     the model a task runs (ModelSpec) and the endpoint it resolves to
    base      SpecModel, the base of every part

This package re-exports the public names, so `from tasks.spec import TaskSpec` keeps working;
code inside the package imports the module that holds a name."""

from __future__ import annotations

from tasks.spec.agents import (
    AGENT_INPUT_MAX_BYTES,
    AgentKindSpec,
    LangGraphAgentSpec,
    OpenAIAgentsSpec,
    PydanticAIAgentSpec,
    spec_agent_kind,
)
from tasks.spec.budget import (
    MAX_TIMEOUT_S,
    RETRY_BUDGET_FIELDS,
    BudgetSpec,
    RetryChanges,
    RetrySpec,
    budget_in_force,
    spec_model_name,
)
from tasks.spec.model import (
    MAX_TURN_TOKENS,
    ModelEndpoint,
    ModelEndpointError,
    ModelSpec,
    OpenAIModelSpec,
    ReplayModelSpec,
    ScriptedCall,
    ScriptedModelSpec,
    ScriptedTurn,
    model_endpoint,
    model_endpoints,
)
from tasks.spec.sections import (
    MAX_WORKSPACE_FILES,
    ChecksSpec,
    ContextSpec,
    ModelReviewSpec,
    ReviewOverride,
    WorkspaceSpec,
)
from tasks.spec.task import AGENT_NAME, DELEGATE_TOOL, AgentSpec, TaskSpec

__all__ = [
    "AGENT_INPUT_MAX_BYTES",
    "AGENT_NAME",
    "DELEGATE_TOOL",
    "MAX_TIMEOUT_S",
    "MAX_TURN_TOKENS",
    "MAX_WORKSPACE_FILES",
    "RETRY_BUDGET_FIELDS",
    "AgentKindSpec",
    "AgentSpec",
    "BudgetSpec",
    "ChecksSpec",
    "ContextSpec",
    "LangGraphAgentSpec",
    "ModelEndpoint",
    "ModelEndpointError",
    "ModelReviewSpec",
    "ModelSpec",
    "OpenAIAgentsSpec",
    "OpenAIModelSpec",
    "PydanticAIAgentSpec",
    "ReplayModelSpec",
    "RetryChanges",
    "RetrySpec",
    "ReviewOverride",
    "ScriptedCall",
    "ScriptedModelSpec",
    "ScriptedTurn",
    "TaskSpec",
    "WorkspaceSpec",
    "budget_in_force",
    "model_endpoint",
    "model_endpoints",
    "spec_agent_kind",
    "spec_model_name",
]
