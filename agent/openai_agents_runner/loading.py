"""What operators name: the registered agent (agent_load, from harness.yaml `openai_agents`)
and the SDK's model for an endpoint they configured, its key bound to it (bound_model)."""

from __future__ import annotations

import os

from agents import Agent, OpenAIChatCompletionsModel
from openai import AsyncOpenAI

from agent.sdk_run.code import registered_object
from harness_base.config import OpenAIAgentEntry, harness_config, openai_agent_entry
from tasks.spec import ModelEndpoint


class AgentNotRegistered(Exception):
    pass


def agent_load(name: str) -> Agent:
    """The agent harness.yaml registers as `name`: an `agents.Agent`, or a factory (any
    callable without arguments) returning one. Only operators name code to import."""
    entry = agent_entry(name)
    return registered_object(
        entry.agent if entry is not None else None,
        kind=Agent,
        kind_name="an agents.Agent",
        name=name,
        what="agent",
        missing=AgentNotRegistered,
    )


def agent_entry(name: str) -> OpenAIAgentEntry | None:
    """harness.yaml's entry for the agent `name` (its reference and its MCP servers' grants)."""
    ref = harness_config().openai_agents.get(name)
    return openai_agent_entry(ref) if ref is not None else None


def bound_model(endpoint: ModelEndpoint) -> OpenAIChatCompletionsModel:
    """The SDK's chat-completions model for an endpoint the operator configured, with the key
    bound to it (a keyless endpoint gets a placeholder, never another endpoint's key)."""
    key = os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=key or "no-key")
    return OpenAIChatCompletionsModel(model=endpoint.model, openai_client=client)
