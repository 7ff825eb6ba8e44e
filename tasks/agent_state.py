"""AgentState: everything needed to continue a task, stored in checkpoints (never pickled).

Resuming re-enters a well-defined phase: `model` (next is a model call) or `tools` (the model's
calls in `pending` are being executed, `next_call` is the first not yet finished)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class _State(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProposedCall(_State):
    call_id: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    # Set when the model's output for this call could not be parsed into arguments.
    raw_error: str | None = None


class MediaPart(_State):
    """An image a tool returned, for a model that takes images (its text result describes it
    too, for one that does not). Bounded: tasks.tools.mcp.MAX_MEDIA_BYTES each."""

    kind: Literal["image"]
    mime_type: str
    data: str  # base64


class Message(_State):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    calls: list[ProposedCall] | None = None
    call_id: str | None = None
    name: str | None = None
    media: list[MediaPart] | None = None


class ErrorInfo(_State):
    error_class: str
    message: str
    step_index: int | None = None
    call_id: str | None = None


class Budget(_State):
    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0
    invalid_calls: int = 0
    cost_usd: float = 0.0


class Checks(_State):
    """The validation funnel's retry bound: steps in a row that failed a check."""

    failed_steps: int = 0
    # Checks failed in the current step (a step fails when any of its calls failed one).
    failures_this_step: int = 0
    last_failure: str = ""


class RecoveryNote(_State):
    """Left in the state by an operator's recovery (checkpoints.recovery). On the next resume
    the loop syncs the workspace to the head checkpoint, turns the note into a
    context-alignment message (checkpoints.alignment) and clears it."""

    kind: Literal["rollback", "retry", "forward"]
    reason: str = ""
    actor: str = ""
    from_seq: int | None = None
    undone: dict[str, Any] = Field(default_factory=dict)
    last_failure: ErrorInfo | None = None


class Compensation(_State):
    """An effect a rollback undoes (checkpoints.recovery.rollback): the compensating call the
    loop runs, as an ordinary tool call, before anything else (agent.runtime.compensate).
    `call_id` is its own idempotency key, derived from the original call's, so a run that
    stops half-way meets the same ledger row again and never runs it twice."""

    call_id: str
    original_call_id: str
    original_tool: str
    tool: str
    # None: they need the result of an original whose outcome was unknown (computed once a
    # person has said it took effect).
    args: dict[str, Any] | None = None
    # Whether the preview said it pauses for review (the gate decides when it runs).
    review: bool = False
    # The original's outcome was unknown when the rollback was confirmed: a person decides
    # first (the unknown-outcome review) whether there is anything to undo.
    outcome_unknown: bool = False
    # pending | compensated | skipped (the ledger shows the original not executed, or an
    # operator chose to leave the effect) | marked_done (an operator undid it by hand)
    outcome: str = "pending"
    result: Any = None


COMPENSATION_SUFFIX = "~undo"


def compensation_call_id(original_call_id: str) -> str:
    """The idempotency key of the compensation of a call: derived from the original's, one
    per original (call_ids are unique per task), so no rollback runs it twice."""
    return f"{original_call_id}{COMPENSATION_SUFFIX}"


class McpTool(_State):
    """An MCP server's tool as discovered when the task started (tasks/tools/mcp/). Recorded in
    the first checkpoint so a resumed task sees the same tools, whatever the server lists now."""

    server: str
    tool: str  # the server's own name for it; the harness calls it `<server>__<tool>`
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    annotations: dict[str, Any] = Field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.server}__{self.tool}"


class AgentState(_State):
    schema_version: int = SCHEMA_VERSION
    messages: list[Message] = Field(default_factory=list)
    summary: str = ""
    hard_facts: list[str] = Field(default_factory=list)
    # turn_index when older turns were last folded into the summary (agent/context.py).
    folded_at_turn: int = 0
    turn_index: int = 0
    step_index: int = 0
    phase: Literal["model", "tools", "done"] = "model"
    pending: list[ProposedCall] = Field(default_factory=list)
    next_call: int = 0
    # Incremented by every rollback, so calls proposed on a new branch get fresh call_ids.
    branch: int = 0
    budget: Budget = Field(default_factory=Budget)
    # Failed attempts of the current model turn (transient errors retried with backoff); reset by
    # a model decision.
    model_retries: int = 0
    last_error: ErrorInfo | None = None
    checks: Checks = Field(default_factory=Checks)
    final: str | None = None
    recovery: RecoveryNote | None = None
    # A rollback's compensations, in the order they run (the reverse of the original calls);
    # the loop runs those still pending before anything else, then the task goes on
    # (`after_compensations` "resume") or is held ("hold").
    compensations: list[Compensation] = Field(default_factory=list)
    after_compensations: Literal["resume", "hold"] = "resume"
    # The MCP tools this task may call, as listed when it started (None: not listed yet).
    mcp_tools: list[McpTool] | None = None
    # An agent SDK's own state, for a task that runs an operator-registered agent instead of
    # the harness's loop (agent/pydantic_ai_runner/: {"kind": "pydantic-ai", ...};
    # agent/openai_agents_runner/: {"kind": "openai-agents", "run_state": ...}). Restored
    # with the checkpoint by rollback, retry and forward like the rest of the state.
    sdk: dict[str, Any] | None = None
    # A plan task (agent.runtime.plan). The dry run: `planning`, the intended effects so far
    # (`plan_items`, the `plan` review's items) and whether a simulated result was answered
    # yet (later calls may depend on it). The execution run: the items its calls used.
    planning: bool = False
    plan_items: list[dict[str, Any]] = Field(default_factory=list)
    plan_simulated: bool = False
    plan_used: list[str] = Field(default_factory=list)

    def compensation_open(self) -> Compensation | None:
        return next((c for c in self.compensations if c.outcome == "pending"), None)

    def new_call_id(self, index: int) -> str:
        return f"{self.branch}.{self.turn_index}.{index}"


def context_note(state: AgentState) -> str:
    """What the model is told about folded history: the summary and the hard facts."""
    parts = []
    if state.summary:
        parts.append(
            "Summary of earlier turns (older messages were folded into it):\n" + state.summary
        )
    if state.hard_facts:
        parts.append(
            "Facts to keep exactly as written:\n"
            + "\n".join(f"- {fact}" for fact in state.hard_facts)
        )
    return "\n\n".join(parts)
