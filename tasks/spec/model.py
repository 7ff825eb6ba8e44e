"""The model a task runs: scripted, OpenAI-compatible (and the endpoint it resolves to) or a
replay of a recorded task."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from django.conf import settings
from pydantic import Field, field_validator, model_validator

from tasks.spec.base import SpecModel

# Far above any real model's turn, far below what the task row's counters hold.
MAX_TURN_TOKENS = 10**9


class ScriptedTurn(SpecModel):
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


class ScriptedCall(SpecModel):
    call: str
    args: dict[str, Any] = Field(default_factory=dict)


ScriptedTurn.model_rebuild()


class ScriptedModelSpec(SpecModel):
    kind: Literal["scripted"]
    script: list[ScriptedTurn] = Field(min_length=1, max_length=10_000)


class OpenAIModelSpec(SpecModel):
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


class ReplayModelSpec(SpecModel):
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
        url, sep, key_env = entry.strip().rpartition("=")
        env: str | None = key_env
        if not sep or not _KEY_ENV.fullmatch(key_env):
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
