"""The agents harness.yaml registers (`pydantic_ai_agents`: agent_load, AgentNotRegistered)
and the model one runs with (agent_model: a spec's OpenAI-compatible endpoint with the key
bound to it, or the agent's own model)."""

from __future__ import annotations

import os
from typing import Any

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agent.sdk_run.code import registered_object
from harness_base.config import harness_config
from tasks.spec import OpenAIModelSpec, model_endpoint


class AgentNotRegistered(Exception):
    pass


def agent_load(name: str) -> Any:
    """The agent harness.yaml registers as `name`: a pydantic_ai Agent, or a factory (called
    with no arguments) that returns one. Only operators name code to import."""
    return registered_object(
        harness_config().pydantic_ai_agents.get(name),
        kind=Agent,
        kind_name="a pydantic_ai.Agent",
        name=name,
        what="Pydantic AI agent",
        missing=AgentNotRegistered,
    )


def agent_model(spec_model: OpenAIModelSpec | None, agent: Any) -> Any:
    """The model the agent runs with, bound as for the harness's own loop: a spec's model is
    an OpenAI-compatible endpoint the operator allowed, with the key bound to it
    (tasks.spec.model_endpoint; a key never comes from a spec). None: the agent's own model.
    An agent without a model gets HARNESS_MODEL at OPENAI_BASE_URL."""
    if spec_model is None and agent.model is not None:
        return None
    endpoint = model_endpoint(spec_model or OpenAIModelSpec(kind="openai"))
    key = os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
    # No retries inside the client: transient errors go through the harness's retry policy.
    # A keyless endpoint gets a placeholder (the client would read OPENAI_API_KEY otherwise).
    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=key or "no-key", max_retries=0)
    return OpenAIChatModel(endpoint.model, provider=OpenAIProvider(openai_client=client))
