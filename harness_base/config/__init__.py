"""`harness.yaml`: the policies (checkpoint triggers, review rules, retry, timeouts, context,
retention), validated by pydantic once at start-up. A bad file fails loudly, naming the key.

The modules, from the bottom: `fields` (durations, RE2 patterns, `Regex`, `EnvName`, `Strict`,
the base of every section), the sections: `policies` (checkpoint triggers, review rules, retry,
timeouts, context, validation, pricing, sandbox, retention, multi-agent), `mcp` (MCP servers),
`notifications` (channels and routes), `compensations` (MCP and HTTP compensations, their
argument templates), `adapters` (LangGraph, Pydantic AI and OpenAI Agents references),
`migrations` (what a version_drift review may apply); `harness` (HarnessConfig, the whole
file) and `loading` (load_config, harness_config). Callers import from this package.
"""

from __future__ import annotations

from harness_base.config.adapters import (
    GraphName,
    GraphRef,
    LangGraphEntry,
    OpenAIAgentEntry,
    langgraph_entry,
    openai_agent_entry,
)
from harness_base.config.compensations import (
    TEMPLATE_ROOTS,
    HttpCompensation,
    HttpConfig,
    HttpMatch,
    HttpRequestTemplate,
    McpCompensation,
)
from harness_base.config.fields import (
    EnvName,
    Regex,
    Strict,
    check_regex,
    compile_pattern,
    parse_duration,
)
from harness_base.config.harness import HarnessConfig
from harness_base.config.loading import harness_config, load_config
from harness_base.config.mcp import AgentMcpServer, McpServerConfig, McpServerName
from harness_base.config.migrations import MigrationEntry, MigrationName, migration_entry
from harness_base.config.notifications import (
    CHANNEL_KINDS,
    ChannelConfig,
    ChannelName,
    EmailChannelConfig,
    HttpUrl,
    NotificationsConfig,
    RouteConfig,
    RouteMatch,
    SlackChannelConfig,
    WebhookChannelConfig,
)
from harness_base.config.policies import (
    DEFAULT_TRIGGERS,
    CheckpointEvent,
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

__all__ = [
    "AgentMcpServer",
    "MigrationEntry",
    "MigrationName",
    "migration_entry",
    "CHANNEL_KINDS",
    "DEFAULT_TRIGGERS",
    "TEMPLATE_ROOTS",
    "ChannelConfig",
    "ChannelName",
    "CheckpointEvent",
    "CheckpointTrigger",
    "ContextConfig",
    "EmailChannelConfig",
    "EnvName",
    "GraphName",
    "GraphRef",
    "HarnessConfig",
    "HttpCompensation",
    "HttpConfig",
    "HttpMatch",
    "HttpRequestTemplate",
    "HttpUrl",
    "LangGraphEntry",
    "OpenAIAgentEntry",
    "McpCompensation",
    "McpServerConfig",
    "McpServerName",
    "ModelPrice",
    "MultiAgentConfig",
    "NotificationsConfig",
    "Regex",
    "RetentionConfig",
    "RetryConfig",
    "ReviewRuleConfig",
    "RouteConfig",
    "RouteMatch",
    "SandboxConfig",
    "SlackChannelConfig",
    "SlaConfig",
    "Strict",
    "TimeoutConfig",
    "ValidationConfig",
    "WebhookChannelConfig",
    "check_regex",
    "compile_pattern",
    "harness_config",
    "langgraph_entry",
    "openai_agent_entry",
    "load_config",
    "parse_duration",
]
