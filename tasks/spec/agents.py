"""Registered agents run instead of the harness's own loop: a LangGraph graph, a Pydantic AI
agent, an OpenAI Agents SDK agent."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, field_validator

from tasks.spec.base import SpecModel
from tasks.spec.model import OpenAIModelSpec

AGENT_INPUT_MAX_BYTES = 256 * 1024

T = TypeVar("T")


def input_bounded(value: T) -> T:
    """A registered agent's `input`: JSON (no NaN, no infinities) of at most
    AGENT_INPUT_MAX_BYTES."""
    import json

    try:
        size = len(json.dumps(value, allow_nan=False).encode())
    except ValueError:
        raise ValueError("must be JSON without NaN or infinite numbers") from None
    if size > AGENT_INPUT_MAX_BYTES:
        raise ValueError(f"at most {AGENT_INPUT_MAX_BYTES} bytes of JSON (got {size})")
    return value


class LangGraphAgentSpec(SpecModel):
    """An operator-registered LangGraph graph (harness.yaml `langgraph_graphs`) instead of the
    harness's own loop; `input` is the graph's first input (its state's JSON)."""

    kind: Literal["langgraph"]
    graph: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    input: dict[str, Any] = Field(default_factory=dict)

    @field_validator("input")
    @classmethod
    def _bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        return input_bounded(value)


class PydanticAIAgentSpec(SpecModel):
    """An operator-registered Pydantic AI agent (harness.yaml `pydantic_ai_agents`) instead of
    the harness's own loop (agent/pydantic_ai_runner/); `input` is its first user prompt:
    text, or JSON (sent as its JSON text); empty: the task's goal. `model` binds an
    OpenAI-compatible endpoint as for the harness's own loop (keys named, never stored);
    unset: the agent's own model, or HARNESS_MODEL at OPENAI_BASE_URL when it has none."""

    kind: Literal["pydantic-ai"]
    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    input: str | dict[str, Any] | list[Any] = ""
    model: OpenAIModelSpec | None = None

    @field_validator("input")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        return input_bounded(value)


class OpenAIAgentsSpec(SpecModel):
    """An operator-registered OpenAI Agents SDK agent (harness.yaml `openai_agents`) run by
    agent.openai_agents_runner. `input` is the run's first input: a string (the user's
    message; empty: the task's goal) or a list of Responses input items. `model` binds the
    agent to an endpoint the operator allows, as for the harness's own loop (keys stay in the
    worker's environment); unset, the agent keeps the model it was registered with."""

    kind: Literal["openai-agents"]
    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    input: str | list[dict[str, Any]] = ""
    model: OpenAIModelSpec | None = None

    @field_validator("input")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        return input_bounded(value)


AgentKindSpec = Annotated[
    LangGraphAgentSpec | PydanticAIAgentSpec | OpenAIAgentsSpec, Field(discriminator="kind")
]


def spec_agent_kind(spec: dict[str, Any] | None) -> str | None:
    """The kind of a stored spec's `agent` (`langgraph`, `pydantic-ai`, ...); None: the
    harness's own loop."""
    agent = (spec or {}).get("agent")
    if not agent:
        return None
    return str(agent.get("kind") or "langgraph")
