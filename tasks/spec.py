"""TaskSpec: the validated body of `POST /api/v1/tasks` (DESIGN §6). Secrets are named by the
environment variable that holds them, never stored in a spec."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness_base.config import Regex, harness_config
from tasks.json_schema import json_schema_check
from tasks.paths import PathEscapeError, PathTooLong, check_path_bounds, validate_relative_path


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


MAX_TIMEOUT_S = 30 * 86400
# Far above any real model's turn, far below what the task row's counters hold.
MAX_TURN_TOKENS = 10**9


class ScriptedTurn(_Spec):
    call: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    calls: list[ScriptedCall] | None = None
    final: str | None = None
    # Tokens this turn reports as used (lets tests and demos exercise the token budget).
    tokens: int = Field(default=0, ge=0, le=MAX_TURN_TOKENS)
    # Seconds the model takes to answer this turn (lets tests and demos exercise the turn
    # timeout, which the harness enforces whether or not the model honours it).
    delay_s: float = Field(default=0, ge=0, le=3600)

    @model_validator(mode="after")
    def _one_kind(self) -> ScriptedTurn:
        kinds = sum(x is not None for x in (self.call, self.calls, self.final))
        if kinds != 1:
            raise ValueError("each turn needs exactly one of 'call', 'calls' or 'final'")
        return self


class ScriptedCall(_Spec):
    call: str
    args: dict[str, Any] = Field(default_factory=dict)


ScriptedTurn.model_rebuild()


class ScriptedModelSpec(_Spec):
    kind: Literal["scripted"]
    script: list[ScriptedTurn] = Field(min_length=1, max_length=10_000)


class OpenAIModelSpec(_Spec):
    """Any server speaking the chat-completions wire format (agent/llm/openai.py)."""

    kind: Literal["openai"]
    # Unset: the HARNESS_MODEL setting.
    model: str | None = Field(default=None, min_length=1, max_length=200)
    # Unset: OPENAI_BASE_URL. Any other endpoint must be listed in HARNESS_MODEL_ENDPOINTS.
    base_url: str | None = Field(default=None, max_length=2000)
    # The name of the environment variable holding the API key, never the key itself. Keys are
    # bound to endpoints by the operator (HARNESS_MODEL_ENDPOINTS): unset takes the endpoint's
    # own; naming any other is refused. Unset in the worker's environment: no key is sent.
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Z][A-Z0-9_]*_API_KEY$")
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, ge=1, le=10**7)
    # The model takes images: an image a tool returns (MCP image content) is sent as an
    # `image_url` part (a data URI) after the tool results. Otherwise it is described only.
    vision: bool = False

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL, e.g. http://localhost:11434/v1")
        return value.rstrip("/") if value else value


class ReplayModelSpec(_Spec):
    kind: Literal["replay"]
    task_id: str


@dataclass(frozen=True)
class ModelEndpoint:
    base_url: str
    model: str
    # The environment variable holding this endpoint's key; None: requests carry no key.
    api_key_env: str | None

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"


class ModelEndpointError(ValueError):
    """An OpenAI-compatible model spec that cannot run here (no model name, an endpoint the
    operator has not allowed, or a key not bound to that endpoint)."""


_KEY_ENV = re.compile(r"[A-Z][A-Z0-9_]*")


def model_endpoints() -> dict[str, str | None]:
    """base URL -> the environment variable holding its key (None: no key).

    OPENAI_BASE_URL takes OPENAI_API_KEY; each HARNESS_MODEL_ENDPOINTS entry is `URL=VAR`
    (that endpoint's key is in $VAR), a bare `URL` (no key) or `*` (any URL, never a key).
    An entry naming OPENAI_BASE_URL rebinds its key."""
    endpoints: dict[str, str | None] = {settings.OPENAI_BASE_URL: "OPENAI_API_KEY"}
    for entry in settings.HARNESS_MODEL_ENDPOINTS:
        url, sep, env = entry.strip().rpartition("=")
        if not sep or not _KEY_ENV.fullmatch(env):
            url, env = entry.strip(), None
        endpoints[url.rstrip("/")] = env
    return endpoints


def model_endpoint(spec: OpenAIModelSpec) -> ModelEndpoint:
    """The endpoint a spec resolves to, with settings as defaults. Raises ModelEndpointError
    for a missing model name, an endpoint the operator has not allowed, or a key variable the
    operator did not bind to that endpoint: a key only ever goes to the endpoint configured
    for it, never to a server a task author picked."""
    model = spec.model or settings.HARNESS_MODEL
    if not model:
        raise ModelEndpointError(
            "no model name: set `model` in the task's model spec or the HARNESS_MODEL setting"
        )
    base_url = spec.base_url or settings.OPENAI_BASE_URL
    endpoints = model_endpoints()
    if base_url in endpoints:
        key_env = endpoints[base_url]
    elif "*" in endpoints:
        key_env = None
    else:
        raise ModelEndpointError(
            f"model endpoint {base_url} is not allowed: use OPENAI_BASE_URL or add "
            "it to HARNESS_MODEL_ENDPOINTS"
        )
    if spec.api_key_env is not None and spec.api_key_env != key_env:
        raise ModelEndpointError(
            f"api_key_env {spec.api_key_env} is not the key of {base_url} (configured: "
            f"{key_env or 'no key'}); keys are bound to endpoints in HARNESS_MODEL_ENDPOINTS"
        )
    return ModelEndpoint(base_url=base_url, model=model, api_key_env=key_env)


ModelSpec = Annotated[
    ScriptedModelSpec | OpenAIModelSpec | ReplayModelSpec, Field(discriminator="kind")
]


AGENT_INPUT_MAX_BYTES = 256 * 1024


class LangGraphAgentSpec(_Spec):
    """An operator-registered LangGraph graph (harness.yaml `langgraph_graphs`) instead of the
    harness's own loop; `input` is the graph's first input (its state's JSON)."""

    kind: Literal["langgraph"]
    graph: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    input: dict[str, Any] = Field(default_factory=dict)

    @field_validator("input")
    @classmethod
    def _bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        import json

        try:
            size = len(json.dumps(value, allow_nan=False).encode())
        except ValueError:
            raise ValueError("must be JSON without NaN or infinite numbers") from None
        if size > AGENT_INPUT_MAX_BYTES:
            raise ValueError(f"at most {AGENT_INPUT_MAX_BYTES} bytes of JSON (got {size})")
        return value


class PydanticAIAgentSpec(_Spec):
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
        import json

        try:
            size = len(json.dumps(value, allow_nan=False).encode())
        except ValueError:
            raise ValueError("must be JSON without NaN or infinite numbers") from None
        if size > AGENT_INPUT_MAX_BYTES:
            raise ValueError(f"at most {AGENT_INPUT_MAX_BYTES} bytes of JSON (got {size})")
        return value


class OpenAIAgentsSpec(_Spec):
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
        return PydanticAIAgentSpec._bounded(value)


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


def _check_relative_paths(paths: Iterable[str]) -> None:
    """Workspace-relative paths within the bounds of tasks.paths; raised as ValueError (naming
    the path) so pydantic reports the field."""
    for path in paths:
        try:
            check_path_bounds(path)
            validate_relative_path(path)
        except (PathEscapeError, PathTooLong) as exc:
            raise ValueError(str(exc)) from None


MAX_WORKSPACE_FILES = 1000


class WorkspaceSpec(_Spec):
    files: dict[str, str] = Field(default_factory=dict)

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str]) -> dict[str, str]:
        if len(files) > MAX_WORKSPACE_FILES:
            raise ValueError(f"at most {MAX_WORKSPACE_FILES} files (got {len(files)})")
        _check_relative_paths(files)
        return files


class BudgetSpec(_Spec):
    max_steps: int = Field(default=50, ge=1, le=100_000)
    max_tokens: int = Field(default=1_000_000, ge=1, le=10**15)
    # Upper bounds keep deadlines representable (a datetime overflows around 1e11 s).
    session_timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    turn_timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    tool_timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)


# The budget fields an operator may change when retrying a task (RetryChanges).
RETRY_BUDGET_FIELDS = (
    "max_steps",
    "max_tokens",
    "session_timeout_s",
    "turn_timeout_s",
    "tool_timeout_s",
)


def budget_in_force(spec: dict[str, Any]) -> dict[str, int | float]:
    """The budget a task runs under: its spec's, with harness.yaml `timeouts` for the timeouts
    the spec leaves unset."""
    budget = BudgetSpec.model_validate((spec or {}).get("budget") or {})
    timeouts = harness_config().timeouts
    return {
        "max_steps": budget.max_steps,
        "max_tokens": budget.max_tokens,
        "session_timeout_s": budget.session_timeout_s or timeouts.session_s,
        "turn_timeout_s": budget.turn_timeout_s or timeouts.turn_s,
        "tool_timeout_s": budget.tool_timeout_s or timeouts.tool_s,
    }


def spec_model_name(spec: dict[str, Any]) -> str | None:
    """The model name of a spec's OpenAI-compatible model (HARNESS_MODEL when it names none):
    what a retry may change (RetryChanges.model); None for any other kind of model."""
    model = (spec or {}).get("model") or {}
    if model.get("kind") != "openai":
        return None
    return model.get("model") or settings.HARNESS_MODEL


class RetryChanges(_Spec):
    """What an operator may change of a stopped task's spec when retrying it (`POST
    /api/v1/tasks/{id}/retry`, the task page's retry form): budget fields (RETRY_BUDGET_FIELDS)
    and the name of an OpenAI-compatible model. The values are checked as part of the whole
    spec, as a new task's would be (tasks.services.task_spec_revise), so every bound holds."""

    budget: dict[str, Any] = Field(default_factory=dict)
    model: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("budget")
    @classmethod
    def _retry_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - set(RETRY_BUDGET_FIELDS))
        if unknown:
            raise ValueError(
                f"cannot change {', '.join(unknown)}; one of {', '.join(RETRY_BUDGET_FIELDS)}"
            )
        return value


class RetrySpec(_Spec):
    """Overrides of `harness.yaml` `retry`, field by field (per task, or per tool in `@tool`)."""

    initial_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    factor: float | None = Field(default=None, ge=1, le=1000)
    max_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    jitter: Literal["none", "full", "equal"] | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)


class ReviewOverride(_Spec):
    # Tools that always pause for review in this task, on top of the configured rules.
    always: list[str] = Field(default_factory=list)


class ContextSpec(_Spec):
    """Per-task overrides of harness.yaml `context` (see harness_base.config.ContextConfig)."""

    recent_history_window: int | None = Field(default=None, ge=2)
    summary_interval: int | None = Field(default=None, ge=1)
    hard_facts_keep: bool | None = None
    hard_facts_max: int | None = Field(default=None, ge=1, le=10_000)
    summary_max_chars: int | None = Field(default=None, ge=200)
    model_summary: bool | None = None
    system_prompt_max_chars: int | None = Field(default=None, ge=200)
    tool_doc_max_chars: int | None = Field(default=None, ge=50)


class ModelReviewSpec(_Spec):
    # The fraction of tasks (chosen by task id, so a resumed task decides the same way) whose
    # final answer the model reviews.
    sample_rate: float = Field(default=1.0, ge=0, le=1)
    instructions: str = Field(default="", max_length=5000)


class ChecksSpec(_Spec):
    """The validation funnel for this task (agent/validation.py). Deep checks on the final
    answer: `files_exist`, `regex`, `json_schema`, `model_review`. Stricter checks on write,
    destructive and external calls: `allowed_paths`, `allowed_hosts`, `max_write_bytes`."""

    files_exist: list[str] = Field(default_factory=list, max_length=200)
    regex: Regex | None = Field(default=None, max_length=2000)
    json_schema: dict[str, Any] | None = None
    model_review: ModelReviewSpec | None = None
    allowed_paths: list[str] | None = Field(default=None, max_length=200)
    allowed_hosts: list[str] | None = Field(default=None, max_length=200)
    max_write_bytes: int | None = Field(default=None, ge=1)
    # Consecutive failing steps before the task fails with `validation_failed`.
    max_retries: int | None = Field(default=None, ge=0, le=100)

    @field_validator("files_exist")
    @classmethod
    def _relative_paths(cls, paths: list[str]) -> list[str]:
        _check_relative_paths(paths)
        return paths

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            json_schema_check(schema=value)
        return value


DELEGATE_TOOL = "delegate"
# Sub-agent names: what the model writes in `delegate {agent}`.
AGENT_NAME = r"^[a-z][a-z0-9_-]{0,62}$"


class AgentSpec(_Spec):
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


class TaskSpec(_Spec):
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

    @model_validator(mode="after")
    def _model_or_agent(self) -> TaskSpec:
        if (self.model is None) == (self.agent is None):
            raise ValueError("give exactly one of 'model' (the harness loop) or 'agent' (a graph)")
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
