"""The model interface. The scripted model, the OpenAI-compatible adapter and the replay model
all implement `ModelAdapter.decide`: given the agent state and the tools it may use, return
the model's next move (tool calls, or a final answer)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from tasks.agent_state import AgentState
from tasks.tools.registry import ToolSpec


@dataclass(frozen=True)
class ModelCall:
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    # Set when the model's output for this call could not be parsed (e.g. malformed JSON).
    raw_error: str | None = None


@dataclass(frozen=True)
class ModelDecision:
    calls: list[ModelCall] = field(default_factory=list)
    final: str | None = None
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ModelError(Exception):
    """A failed model call. `error_class` is `transient` (429, 5xx, connection errors,
    timeouts: worth retrying) or `permanent` (other 4xx, a script that ran out)."""

    def __init__(
        self,
        message: str,
        *,
        error_class: str = "permanent",
        retry_after_s: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.retry_after_s = retry_after_s
        self.status = status


class ModelAdapter(ABC):
    name: str = "model"
    # Whether `complete` works: the context policy then lets the model write the rolling
    # summary, and `checks.model_review` can run. Otherwise both use their fallbacks.
    can_complete: bool = False

    @abstractmethod
    def decide(
        self, *, state: AgentState, tools: list[ToolSpec], timeout_s: float
    ) -> ModelDecision:
        """The model's next move. Raises ModelError; must return within `timeout_s`."""

    def complete(self, *, system: str, prompt: str, timeout_s: float) -> ModelDecision:
        """Free text for a one-off prompt (no tools, no history) in `ModelDecision.text`."""
        raise ModelError(
            f"the {self.name} model cannot answer free-text prompts", error_class="permanent"
        )
