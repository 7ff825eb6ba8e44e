"""TaskSpec: the validated body of `POST /api/v1/tasks` (DESIGN §6). Secrets are named by the
environment variable that holds them, never stored in a spec."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptedTurn(_Spec):
    call: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    calls: list[ScriptedCall] | None = None
    final: str | None = None
    # Tokens this turn reports as used (lets tests and demos exercise the token budget).
    tokens: int = Field(default=0, ge=0)

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
    kind: Literal["openai"]
    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, ge=1)


class ReplayModelSpec(_Spec):
    kind: Literal["replay"]
    task_id: str


ModelSpec = Annotated[
    ScriptedModelSpec | OpenAIModelSpec | ReplayModelSpec, Field(discriminator="kind")
]


class WorkspaceSpec(_Spec):
    files: dict[str, str] = Field(default_factory=dict)

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str]) -> dict[str, str]:
        from tasks.tools.workspace import PathEscapeError, validate_relative_path

        for path in files:
            try:
                validate_relative_path(path)
            except PathEscapeError as exc:
                raise ValueError(str(exc)) from None
        return files


class BudgetSpec(_Spec):
    max_steps: int = Field(default=50, ge=1, le=100_000)
    max_tokens: int = Field(default=1_000_000, ge=1)
    session_timeout_s: float | None = Field(default=None, gt=0)
    turn_timeout_s: float | None = Field(default=None, gt=0)
    tool_timeout_s: float | None = Field(default=None, gt=0)


class RetrySpec(_Spec):
    initial_s: float | None = Field(default=None, gt=0)
    max_s: float | None = Field(default=None, gt=0)
    max_attempts: int | None = Field(default=None, ge=1, le=100)


class ReviewOverride(_Spec):
    # Tools that always pause for review in this task, on top of the configured rules.
    always: list[str] = Field(default_factory=list)


class TaskSpec(_Spec):
    title: str = Field(min_length=1, max_length=200)
    goal: str = Field(min_length=1, max_length=100_000)
    priority: Literal["high", "default", "low"] = "default"
    model: ModelSpec
    tools: list[str] = Field(default_factory=list, max_length=200)
    workspace: WorkspaceSpec = Field(default_factory=WorkspaceSpec)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    review: ReviewOverride | None = None
    retry: RetrySpec | None = None
    recovery: dict[str, Literal["rollback", "retry", "forward", "auto"]] = Field(
        default_factory=dict
    )
    system_prompt: str | None = Field(default=None, max_length=50_000)
