"""The loop's policy sections: checkpoint triggers (and their defaults), review rules, retry,
timeouts, context, validation, pricing, the sandbox, retention and multi-agent groups."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from harness_base.config.fields import Regex, Strict, parse_duration

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


class CheckpointTrigger(Strict):
    event: CheckpointEvent
    level: Literal["task", "step", "tool"]
    max_retries: int | None = Field(default=None, ge=0)


class SlaConfig(Strict):
    """A review's target time to decision (`decide_within`, a duration: 30m, 4h): a review
    decided later, or still open past it, breached it (the SLA page, harness_reviews_past_sla,
    harness_review_sla_breaches_total)."""

    decide_within: float

    @field_validator("decide_within", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        seconds = parse_duration(value)
        if not 0 < seconds <= 366 * 86400:
            raise ValueError(f"decide_within must lie between 1s and 366d, not {value!r}")
        return seconds


class ReviewRuleConfig(Strict):
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
    # The rule's target time to decision; without one, harness.yaml's `review_sla`.
    sla: SlaConfig | None = None

    @field_validator("expires_after", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float | None:
        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _sla_on_review(self) -> ReviewRuleConfig:
        if self.sla is not None and self.action != "review":
            raise ValueError(f"sla: only a review rule has a time to decision, not {self.action}")
        return self


class RetryConfig(Strict):
    initial_s: float = Field(default=1.0, gt=0)
    factor: float = Field(default=2.0, ge=1)
    max_s: float = Field(default=60.0, gt=0)
    jitter: Literal["none", "full", "equal"] = "full"
    max_attempts: int = Field(default=5, ge=1, le=100)


class TimeoutConfig(Strict):
    session_s: float = Field(default=3600, gt=0)
    turn_s: float = Field(default=300, gt=0)
    tool_s: float = Field(default=60, gt=0)


class ContextConfig(Strict):
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


class ValidationConfig(Strict):
    """The validation funnel's defaults (agent/validation.py); a TaskSpec `checks` narrows them."""

    # Consecutive steps that may fail a check before the task fails with `validation_failed`.
    max_retries: int = Field(default=3, ge=0, le=100)
    # Size limit on the text a write or external call sends (`content`, `body`).
    max_write_bytes: int = Field(default=1024 * 1024, ge=1)


class ModelPrice(Strict):
    prompt_per_1k: float = Field(ge=0)
    completion_per_1k: float = Field(ge=0)


class SandboxConfig(Strict):
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


class RetentionConfig(Strict):
    """checkpoints/retention/: once a task finishes, of each checkpoint level it keeps the
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


class MultiAgentConfig(Strict):
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
