"""Failure classes and the retry policy (DESIGN §5).

Every failure has an error class. Three of them decide what happens next:

- `transient` — worth trying again: timeouts, rate limits (429), connection errors, 5xx;
- `permanent` — trying again cannot help: bad arguments, other 4xx, a tool's own refusal;
- `unknown_outcome` — a side-effecting call was running when its worker died; a
  non-idempotent one goes to a human (`review` kind `unknown_outcome`), never blindly re-run.

Every other class is permanent: `tool_crashed` (an unclassified exception: a bug), and the
harness's own refusals (`invalid_arguments`, `invalid_call`, `denied`, `rejected`).

`timeout` is transient with one caveat: a call the harness had to stop may have half-acted, so
only idempotent tools are retried after a timeout. A tool's own `TransientToolError` is retried
whatever its idempotency flag: raising it is the tool's promise that nothing happened (or that
the far side deduplicates by `ctx.idempotency_key`).

The wait before attempt n+1 is `min(max_s, initial_s * factor^(n-1)) + jitter`, where jitter is
drawn from [0, base) (`full`), [0, base/2) (`equal`) or is 0 (`none`) — so waits grow
monotonically with `factor >= 2` until they reach `max_s` — and never less than a server's
Retry-After. The policy is `harness.yaml` `retry`, overridden field by field per tool
(`@tool(retry=...)`) and then per task (`TaskSpec.retry`); the `on_retryable_error` checkpoint
trigger's `max_retries`, when set, caps the attempts of every policy.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from harness_base.config import HarnessConfig
from tasks.spec import RetrySpec

TRANSIENT = "transient"
TIMEOUT = "timeout"
UNKNOWN_OUTCOME = "unknown_outcome"
TOOL_CRASHED = "tool_crashed"
# Every class a tool call's attempt can fail with (the metrics' `error_class` label; a tool's
# own ToolError may name any other, which counts as `other`).
TOOL_ERROR_CLASSES = frozenset(
    {TRANSIENT, "permanent", TIMEOUT, UNKNOWN_OUTCOME, TOOL_CRASHED, "mcp_unavailable"}
)


@dataclass(frozen=True)
class RetryPolicy:
    initial_s: float
    factor: float
    max_s: float
    jitter: str
    max_attempts: int

    def merged(self, override: RetrySpec | None) -> RetryPolicy:
        if override is None:
            return self
        fields = override.model_dump(exclude_none=True)
        return replace(self, **fields)

    def delay_s(
        self, attempt: int, *, retry_after_s: float | None = None, rng: random.Random | None = None
    ) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        base = min(self.max_s, self.initial_s * self.factor ** (attempt - 1))
        draw = (rng or random).random()
        jitter = {"none": 0.0, "full": base * draw, "equal": base * draw / 2}[self.jitter]
        return max(base + jitter, retry_after_s or 0.0)


def retry_policy(
    *,
    config: HarnessConfig,
    tool_override: RetrySpec | None = None,
    task_override: RetrySpec | None = None,
) -> RetryPolicy:
    base = config.retry
    policy = RetryPolicy(
        initial_s=base.initial_s,
        factor=base.factor,
        max_s=base.max_s,
        jitter=base.jitter,
        max_attempts=base.max_attempts,
    )
    policy = policy.merged(tool_override).merged(task_override)
    trigger = config.trigger("on_retryable_error")
    if trigger is not None and trigger.max_retries is not None:
        policy = replace(policy, max_attempts=min(policy.max_attempts, trigger.max_retries + 1))
    return policy


def classify_exception(exc: BaseException) -> str:
    """The class of an exception a tool raised without classifying it itself: a timeout or a
    dropped connection is worth another attempt; anything else is a bug in the tool
    (`tool_crashed`, permanent)."""
    if isinstance(exc, TimeoutError):
        return TIMEOUT
    if isinstance(exc, ConnectionError):
        return TRANSIENT
    return TOOL_CRASHED


def is_retryable(error_class: str, *, idempotent: bool) -> bool:
    if error_class == TRANSIENT:
        return True
    return error_class == TIMEOUT and idempotent
