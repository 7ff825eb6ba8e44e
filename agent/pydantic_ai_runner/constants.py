"""The constants of a Pydantic AI run: the agent kind its state and its reviews are marked
with, the decisions a reviewer may give, a tool's default risk, the bounds on stored text,
and the model errors the harness's retry policy retries."""

from __future__ import annotations

from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelRateLimitError,
    ModelRequestTimeout,
    ModelServerError,
    ModelUnavailableError,
)

KIND = "pydantic-ai"
REVIEW_KIND = "pydantic-ai"
# The decisions a reviewer may give a Pydantic AI approval: ToolApproved, ToolApproved with
# override_args, ToolDenied.
DECISIONS = ["approve", "edit", "reject"]
# ... and an external call (CallDeferred): respond with the tool's result, or reject (the model
# is told the call failed).
EXTERNAL_DECISIONS = ["respond", "reject"]
# A tool's risk when its metadata names none (no risk rule matches it; tool rules do).
DEFAULT_RISK = "agent"
RESULT_MAX_CHARS = 5000
# Model errors the harness's retry policy retries (harness.yaml `retry`, the spec's `retry`):
# the task waits in retry_wait and resumes from its last checkpoint; no worker sleeps.
TRANSIENT_MODEL_ERRORS = (
    ModelRateLimitError,
    ModelUnavailableError,
    ModelServerError,
    ModelConnectionError,
    ModelRequestTimeout,
)
TEXT_MAX_CHARS = 2000
