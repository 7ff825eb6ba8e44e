"""The budget a task runs under, the retry policy, and what an operator may change when
retrying a task."""

from __future__ import annotations

from typing import Any, Literal

from django.conf import settings
from pydantic import Field, field_validator

from harness_base.config import harness_config
from tasks.spec.base import SpecModel

MAX_TIMEOUT_S = 30 * 86400


class BudgetSpec(SpecModel):
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


class RetryChanges(SpecModel):
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


class RetrySpec(SpecModel):
    """Overrides of `harness.yaml` `retry`, field by field (per task, or per tool in `@tool`)."""

    initial_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    factor: float | None = Field(default=None, ge=1, le=1000)
    max_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    jitter: Literal["none", "full", "equal"] | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)
