"""`harness.yaml`: the policies (checkpoint triggers, review rules, retry, timeouts, context,
retention), validated by pydantic once at start-up. A bad file fails loudly, naming the key."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import re2
import yaml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(value: object) -> float:
    """`90`, `"90s"`, `"15m"`, `"4h"` -> seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 30s, 15m, 4h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 8 * 1024**2


@functools.lru_cache(maxsize=512)
def compile_pattern(value: str, *, multiline: bool = False) -> Any:
    """Compile a pattern from a spec, a model or a rule on RE2, which matches in linear time
    (no backtracking, so no pattern can pin a CPU). RE2 has no backreferences or lookaround:
    such a pattern is a ValueError saying so."""
    try:
        return re2.compile(("(?m)" if multiline else "") + value, _RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args else "invalid"
        raise ValueError(
            f"invalid regular expression ({detail}); patterns run on RE2, a linear-time "
            "engine without backreferences or lookaround"
        ) from None


def check_regex(value: str) -> str:
    compile_pattern(value)
    return value


# A pattern that compiles on RE2 (a ValueError names the field otherwise).
Regex = Annotated[str, AfterValidator(check_regex)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


CheckpointEvent = Literal[
    "task_start",
    "after_model",
    "after_planning_step",
    "after_step",
    "before_tool",
    "before_write_operation",
    "before_external_call",
    "before_review",
    "before_delegate",
    "on_retryable_error",
]


class CheckpointTrigger(_Strict):
    event: CheckpointEvent
    level: Literal["task", "step", "tool"]
    max_retries: int | None = Field(default=None, ge=0)


class ReviewRuleConfig(_Strict):
    name: str = Field(min_length=1, max_length=100)
    tool: str | None = None
    risk: Literal["read", "write", "execute", "external", "destructive"] | None = None
    path_glob: str | None = None
    command_regex: Regex | None = None
    url_host: str | None = None
    action: Literal["allow", "review", "deny"]
    reason: str = ""
    expires_after: float | None = None
    on_expiry: Literal["reject", "fail_task"] = "reject"
    approvals_required: int = Field(default=1, ge=1, le=5)
    forbid_creator: bool = False

    @field_validator("expires_after", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float | None:
        return None if value is None else parse_duration(value)


class RetryConfig(_Strict):
    initial_s: float = Field(default=1.0, gt=0)
    factor: float = Field(default=2.0, ge=1)
    max_s: float = Field(default=60.0, gt=0)
    jitter: Literal["none", "full", "equal"] = "full"
    max_attempts: int = Field(default=5, ge=1, le=100)


class TimeoutConfig(_Strict):
    session_s: float = Field(default=3600, gt=0)
    turn_s: float = Field(default=300, gt=0)
    tool_s: float = Field(default=60, gt=0)


class ContextConfig(_Strict):
    """How AgentState stays bounded (agent/context.py). A TaskSpec `context` overrides any key."""

    # Messages after the pinned system prompt and goal kept verbatim.
    recent_history_window: int = Field(default=20, ge=2)
    # Every this many model turns, turns older than the window fold into the rolling summary.
    summary_interval: int = Field(default=8, ge=1)
    # Keep amounts, dates, ids and explicit user constraints verbatim in AgentState.hard_facts.
    hard_facts_keep: bool = True
    hard_facts_max: int = Field(default=100, ge=1, le=10_000)
    summary_max_chars: int = Field(default=4000, ge=200)
    # Let the model write the summary when its adapter can; otherwise (or when it fails) the
    # deterministic extractive summary is used.
    model_summary: bool = True
    system_prompt_max_chars: int = Field(default=8000, ge=200)
    tool_doc_max_chars: int = Field(default=1000, ge=50)


class ValidationConfig(_Strict):
    """The validation funnel's defaults (agent/validation.py); a TaskSpec `checks` narrows them."""

    # Consecutive steps that may fail a check before the task fails with `validation_failed`.
    max_retries: int = Field(default=3, ge=0, le=100)
    # Size limit on the text a write or external call sends (`content`, `body`).
    max_write_bytes: int = Field(default=1024 * 1024, ge=1)


class ModelPrice(_Strict):
    prompt_per_1k: float = Field(ge=0)
    completion_per_1k: float = Field(ge=0)


class SandboxConfig(_Strict):
    """Limits of the `run_command` sandbox (agent/tools/sandbox/), each for the whole
    sandbox, and whether a call may ask for network access."""

    memory_mb: int = Field(default=1024, ge=16, le=1024 * 1024)
    processes: int = Field(default=256, ge=4, le=100_000)
    # The disk quota of each workspace, and of each group's shared directory, in all
    # (agent/tools/quota.py), not per call.
    disk_mb: int = Field(default=512, ge=1, le=1024 * 1024)
    file_mb: int = Field(default=100, ge=1, le=1024 * 1024)
    tmp_mb: int = Field(default=256, ge=1, le=1024 * 1024)
    # Off by default: a call asking for network fails unless this is true (and the request,
    # like every command, goes through review).
    allow_network: bool = False


class RetentionConfig(_Strict):
    """checkpoints/retention.py: once a task finishes, of each checkpoint level it keeps the
    newest `keep_last_per_task` (every checkpoint of a level in `keep_levels`). The sweep
    applies it every `every` seconds; unreferenced blobs are collected every `gc_every`."""

    keep_last_per_task: int = Field(default=50, ge=1)
    keep_levels: list[Literal["task", "step", "tool"]] = ["task", "step"]
    every: float = Field(default=600.0, gt=0)
    gc_every: float = Field(default=86400.0, gt=0)

    @field_validator("every", "gc_every", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        return parse_duration(value)


# A server name joins its tools' names as `<server>__<tool>`, which must stay a name every model
# API accepts (`^[a-zA-Z0-9_-]{1,64}$`): no double underscore inside, short enough to leave room.
McpServerName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$", max_length=30)
]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]


class McpServerConfig(_Strict):
    """One MCP server whose tools join the registry as `<server>__<tool>` (tasks/tools/mcp.py).

    stdio (`command`): started per task run inside the task's sandbox, the workspace as its
    working directory, `env` (plus PATH) as its whole environment, `ro_paths` mounted read-only,
    no network unless `network: true`. Streamable HTTP (`url`): shared; `headers_env` maps a
    header to the environment variable of the worker that holds its value (never the value).
    In `command`, `env` and `ro_paths`, `{python}` stands for the worker's own interpreter (its
    virtualenv and base installation are then mounted read-only) and `{harness}` for the
    harness's base directory, so a server shipped with the harness needs no machine paths."""

    command: list[Annotated[str, StringConstraints(min_length=1)]] | None = Field(
        default=None, min_length=1
    )
    env: dict[EnvName, str] = {}
    ro_paths: list[str] = []
    network: bool = False
    url: str | None = None
    headers_env: dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]+$", max_length=100)], EnvName
    ] = {}
    # How long connecting and listing the tools may take.
    connect_timeout_s: float = Field(default=20, gt=0, le=600)

    @field_validator("ro_paths")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path.startswith(("/", "{harness}/")) or "\0" in path:
                raise ValueError(
                    f"{path!r}: read-only mounts must be absolute paths (or start {{harness}}/)"
                )
        return paths

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL, e.g. http://127.0.0.1:8765/mcp")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        if self.url is not None and (self.env or self.ro_paths or self.network):
            raise ValueError("'env', 'ro_paths' and 'network' apply to stdio servers ('command')")
        if self.command is not None and self.headers_env:
            raise ValueError("'headers_env' applies to HTTP servers ('url')")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


class MultiAgentConfig(_Strict):
    """Multi-agent groups (multiagent/): when the coordinator takes a global checkpoint, and
    how long a participant may take to prepare before the round aborts."""

    # `children_finished`: when every child delegated in one turn has ended;
    # `operator_request`: when an operator asks (POST /api/v1/tasks/{id}/global-checkpoints);
    # `before_side_effects` (off by default): before the group's root runs a side-effecting
    # call (a write, a command, an external call), once it has delegated.
    global_checkpoints: list[
        Literal["children_finished", "operator_request", "before_side_effects"]
    ] = [
        "children_finished",
        "operator_request",
    ]
    prepare_timeout_s: float = Field(default=30.0, gt=0, le=3600)

    @field_validator("prepare_timeout_s", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        return parse_duration(value)


ChannelName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


HttpUrl = Annotated[str, StringConstraints(max_length=2000), AfterValidator(_http_url)]


class EmailChannelConfig(_Strict):
    """Mail through Django's email backend (EMAIL_HOST... from the environment): to `to`, or
    to the members of `group` who have an email address."""

    kind: Literal["email"]
    to: list[Annotated[str, StringConstraints(pattern=r"^[^@\s]+@[^@\s]+$")]] = []
    group: str | None = Field(default=None, min_length=1, max_length=150)

    @model_validator(mode="after")
    def _recipients(self) -> EmailChannelConfig:
        if bool(self.to) == (self.group is not None):
            raise ValueError("give exactly one of 'to' (addresses) or 'group' (a group's members)")
        return self


class WebhookChannelConfig(_Strict):
    """A JSON POST signed per Standard Webhooks with the secret in the env var `secret_env`."""

    kind: Literal["webhook"]
    url: HttpUrl
    secret_env: EnvName


class SlackChannelConfig(_Strict):
    """A Block Kit message to the incoming webhook whose URL is in `webhook_url_env`;
    `signing_secret_env` names the variable holding the app's signing secret and
    `bot_token_env` its bot token (users.info, scope users:read.email): button clicks are
    taken only with both (review/slack.py)."""

    kind: Literal["slack"]
    webhook_url_env: EnvName
    signing_secret_env: EnvName | None = None
    bot_token_env: EnvName | None = None


CHANNEL_KINDS = ("email", "webhook", "slack")
ChannelConfig = Annotated[
    EmailChannelConfig | WebhookChannelConfig | SlackChannelConfig, Field(discriminator="kind")
]


class RouteMatch(_Strict):
    """Every key given must match: a rule the review matched, its tool, its risk, a group of
    the task's creator. `{}` matches every review."""

    rule: str | None = None
    tool: str | None = None
    risk: Literal["read", "write", "execute", "external", "destructive"] | None = None
    group: str | None = None


class RouteConfig(_Strict):
    match: RouteMatch = RouteMatch()
    notify: list[ChannelName] = Field(min_length=1)
    # A reminder to `notify` this long before the review expires (reviews that expire).
    remind_before_s: float | None = Field(default=None, gt=0)
    # Still pending this long after it opened: `escalate_to` is notified as well.
    escalate_after_s: float | None = Field(default=None, gt=0)
    escalate_to: list[ChannelName] = []

    @field_validator("remind_before_s", "escalate_after_s", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float | None:
        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _escalation(self) -> RouteConfig:
        if (self.escalate_after_s is None) != (not self.escalate_to):
            raise ValueError("give 'escalate_after_s' and 'escalate_to' together")
        return self


class NotificationsConfig(_Strict):
    """Who hears of a review (review/notifications.py): the first route whose `match` fits."""

    channels: dict[ChannelName, ChannelConfig] = {}
    routes: list[RouteConfig] = []

    @model_validator(mode="after")
    def _known_channels(self) -> NotificationsConfig:
        for index, route in enumerate(self.routes):
            for key in ("notify", "escalate_to"):
                for name in getattr(route, key):
                    if name not in self.channels:
                        raise ValueError(
                            f"routes.{index}.{key}: no channel named {name!r} in "
                            f"notifications.channels"
                        )
        return self


DEFAULT_TRIGGERS = [
    CheckpointTrigger(event="task_start", level="task"),
    CheckpointTrigger(event="after_model", level="step"),
    CheckpointTrigger(event="before_write_operation", level="tool"),
    CheckpointTrigger(event="before_external_call", level="tool"),
    CheckpointTrigger(event="before_review", level="tool"),
    CheckpointTrigger(event="before_delegate", level="step"),
    CheckpointTrigger(event="after_step", level="step"),
    CheckpointTrigger(event="on_retryable_error", level="step", max_retries=3),
]


GraphName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
GraphRef = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
    ),
]


class LangGraphEntry(_Strict):
    """A registered LangGraph graph with its options (docs/langgraph.md)."""

    graph: GraphRef
    # What a plain `interrupt(...)` of this graph returns once reviewed: "envelope" (the
    # default) the harness's {"type": "approve" | "reject" | "respond", ...}; "value" the
    # reviewer's response itself, as `Command(resume=value)` would give it (such a review
    # offers respond and reject; a rejection stops the task instead of resuming the graph).
    interrupt_resume: Literal["envelope", "value"] = "envelope"


def langgraph_entry(ref: str | LangGraphEntry) -> LangGraphEntry:
    """A `langgraph_graphs` value as an entry (a bare reference has the default options)."""
    return ref if isinstance(ref, LangGraphEntry) else LangGraphEntry(graph=ref)


class HarnessConfig(_Strict):
    checkpoint_triggers: list[CheckpointTrigger] = DEFAULT_TRIGGERS
    review_rules: list[ReviewRuleConfig] = []
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
    openai_agents: dict[GraphName, GraphRef] = {}
    mcp_servers: dict[McpServerName, McpServerConfig] = {}
    multi_agent: MultiAgentConfig = MultiAgentConfig()

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


def _key(loc: tuple[Any, ...]) -> str:
    parts = [str(part) for part in loc]
    # A channel's `kind` selects its model; pydantic names it in the location, the file does not.
    if parts[:2] == ["notifications", "channels"] and len(parts) > 3 and parts[3] in CHANNEL_KINDS:
        del parts[3]
    return ".".join(parts) or "(top level)"


def _describe(error: ValidationError, source: Path) -> str:
    lines = [f"{source}: invalid configuration"]
    for item in error.errors():
        key = _key(item["loc"])
        lines.append(f"  {key}: {item['msg']}")
    return "\n".join(lines)


def load_config(path: Path) -> HarnessConfig:
    if not path.exists():
        return HarnessConfig()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ImproperlyConfigured(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(f"{path}: the top level must be a mapping of keys")
    try:
        return HarnessConfig.model_validate(raw)
    except ValidationError as exc:
        raise ImproperlyConfigured(_describe(exc, path)) from None


@functools.cache
def harness_config() -> HarnessConfig:
    return load_config(Path(settings.HARNESS_CONFIG_FILE))
