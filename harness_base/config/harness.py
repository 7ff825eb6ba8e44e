"""HarnessConfig: the whole of `harness.yaml`, one key per section."""

from __future__ import annotations

from pydantic import Field

from harness_base.config.adapters import GraphName, GraphRef, LangGraphEntry, OpenAIAgentEntry
from harness_base.config.compensations import HttpConfig
from harness_base.config.fields import Strict
from harness_base.config.mcp import McpServerConfig, McpServerName
from harness_base.config.migrations import MigrationEntry, MigrationName, MigrationRef
from harness_base.config.notifications import NotificationsConfig
from harness_base.config.policies import (
    DEFAULT_TRIGGERS,
    CheckpointTrigger,
    ContextConfig,
    ModelPrice,
    MultiAgentConfig,
    RetentionConfig,
    RetryConfig,
    ReviewRuleConfig,
    SandboxConfig,
    SlaConfig,
    TimeoutConfig,
    ValidationConfig,
)


class HarnessConfig(Strict):
    checkpoint_triggers: list[CheckpointTrigger] = DEFAULT_TRIGGERS
    review_rules: list[ReviewRuleConfig] = []
    # The target time to decision of a review none of whose rules sets its own `sla`.
    review_sla: SlaConfig = SlaConfig(decide_within=3600)
    retry: RetryConfig = RetryConfig()
    timeouts: TimeoutConfig = TimeoutConfig()
    context: ContextConfig = ContextConfig()
    retention: RetentionConfig = RetentionConfig()
    validation: ValidationConfig = ValidationConfig()
    sandbox: SandboxConfig = SandboxConfig()
    # USD per 1000 tokens, by model name; a key also prices every model whose name starts with
    # it (`gpt-4o-mini` prices `gpt-4o-mini-2024-07-18`). Unpriced models cost 0.
    pricing: dict[str, ModelPrice] = {}
    # Deprecated: use a `notifications` webhook channel. Still sent, unsigned, on review.requested.
    review_webhook_url: str | None = None
    notifications: NotificationsConfig = NotificationsConfig()
    max_concurrent_tasks: int | None = Field(default=None, ge=1)
    # LangGraph graphs a TaskSpec may name (`"agent": {"kind": "langgraph", "graph": NAME}`):
    # NAME -> "package.module:attribute", a compiled graph or a StateGraph. Only operators
    # name code to import; a spec only picks a NAME from here.
    # Or NAME -> {graph: "package.module:attribute", interrupt_resume: envelope | value}.
    langgraph_graphs: dict[GraphName, GraphRef | LangGraphEntry] = {}
    # Pydantic AI agents a TaskSpec may name (`"agent": {"kind": "pydantic-ai", "name": NAME}`):
    # NAME -> "package.module:attribute", a pydantic_ai.Agent or a factory returning one.
    pydantic_ai_agents: dict[GraphName, GraphRef] = {}
    # OpenAI Agents SDK agents a TaskSpec may name (`"agent": {"kind": "openai-agents", "name":
    # NAME}`): NAME -> "package.module:attribute", an `agents.Agent` or a factory returning one.
    # Or NAME -> {agent: "package.module:attribute", mcp_servers: {SERVER: {ro_paths, network,
    # remote}}}: how the agent's own MCP servers run (AgentMcpServer).
    openai_agents: dict[GraphName, GraphRef | OpenAIAgentEntry] = {}
    mcp_servers: dict[McpServerName, McpServerConfig] = {}
    multi_agent: MultiAgentConfig = MultiAgentConfig()
    # `http_request`: compensating requests for the calls a rollback undoes.
    http: HttpConfig = HttpConfig()
    # Functions a `version_drift` review may apply by name (`"decision": "migrate"`): NAME ->
    # "package.module:function" or {function, description} (docs/deploying.md).
    migrations: dict[MigrationName, MigrationRef | MigrationEntry] = {}

    def trigger(self, event: str) -> CheckpointTrigger | None:
        """The configured trigger for a loop boundary, or None when it is switched off."""
        for item in self.checkpoint_triggers:
            if item.event == event:
                return item
        return None

    def cost_usd(self, *, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        price = self.pricing.get(model)
        if price is None:
            prefixes = [key for key in self.pricing if model.startswith(key)]
            price = self.pricing[max(prefixes, key=len)] if prefixes else None
        if price is None:
            return 0.0
        return (
            prompt_tokens * price.prompt_per_1k + completion_tokens * price.completion_per_1k
        ) / 1000
