"""Run's bookkeeping (RunBookkeeping, part of Run: agent.runtime.run): events, the time and
usage counted against the task, model charges, check failures, MCP errors, and the tools the
task may call. The state it reads is set by `Run.__init__`."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from agent.llm import ModelDecision
from tasks import services
from tasks.events import EventType
from tasks.models import ToolCall
from tasks.spec import MAX_TURN_TOKENS
from tasks.tools.registry import ToolContext, ToolSpec, registry

if TYPE_CHECKING:
    from agent.llm import ModelAdapter
    from agent.runtime.session_clock import SessionClock
    from agent.tools.mcp_client import McpConnections
    from checkpoints.models import Blob, Checkpoint
    from checkpoints.payload import CheckpointCodec
    from harness_base.config import HarnessConfig
    from tasks.agent_state import AgentState
    from tasks.models import Task, TaskEvent, ToolOutput
    from tasks.spec import TaskSpec

# Task.cost_usd is a decimal(12, 6): the running cost stops just below what it holds.
MAX_COST_USD = 999_999.0


class RunBookkeeping:
    """Run's events, clocks, usage and tools."""

    # The state the parts share, set by `Run.__init__` (agent.runtime.run says what each is).
    task: Task
    task_id: UUID
    epoch: int
    spec: TaskSpec
    config: HarnessConfig
    tool_s: float
    model: ModelAdapter
    workspace: Path
    shared: Path | None
    pending_events: list[TaskEvent]
    deferred_rows: list[ToolCall]
    pending_outputs: list[ToolOutput]
    snapshot: dict | None
    changed: set[str]
    cancel_seen: bool
    state: AgentState
    head_id: Any
    written_head: Any
    staged: list[Checkpoint]
    blobs: dict[str, Blob]
    codec: CheckpointCodec
    turn_unwritten: bool
    effect_unwritten: bool
    seq: int
    run_started: float
    seconds_before: float
    session: SessionClock
    human_wait_s: float
    mcp: McpConnections
    mcp_specs: dict[str, ToolSpec]

    # -- bookkeeping ---------------------------------------------------------------------

    def event(self, type: str, payload: dict | None = None) -> None:
        self.pending_events.append(
            services.event_build(
                task_id=self.task_id,
                type=type,
                payload=payload,
                step_index=self.state.step_index,
            )
        )

    def timeout_event(self, *, layer: str, limit_s: float, **payload: Any) -> None:
        self.event(EventType.TIMEOUT, {"layer": layer, "limit_s": limit_s, **payload})

    def elapsed(self) -> float:
        return self.seconds_before + (time.monotonic() - self.run_started)

    def session_elapsed(self) -> float:
        return self.session.elapsed_s() - self.human_wait_s

    def usage_fields(self) -> dict[str, Any]:
        return {
            "current_step": self.state.step_index,
            "steps_used": self.state.budget.steps,
            "tokens_used": self.state.budget.tokens,
            "cost_usd": Decimal(f"{self.state.budget.cost_usd:.6f}"),
            "seconds_used": self.elapsed(),
        }

    def charge(self, usage: ModelDecision) -> dict[str, Any]:
        """Count a model call's tokens and cost against the task; the event fields for it.
        An adapter's counts are input too (a server can report anything): each is clamped to
        MAX_TURN_TOKENS and the running cost to what the task row holds."""
        model = usage.model or self.model.name
        prompt = min(max(usage.prompt_tokens, 0), MAX_TURN_TOKENS)
        completion = min(max(usage.completion_tokens, 0), MAX_TURN_TOKENS)
        cost = self.config.cost_usd(model=model, prompt_tokens=prompt, completion_tokens=completion)
        self.state.budget.tokens += min(prompt + completion, MAX_TURN_TOKENS)
        self.state.budget.cost_usd = min(self.state.budget.cost_usd + cost, MAX_COST_USD)
        return {
            "model": model,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "cost_usd": round(cost, 8),
        }

    def note_check_failure(self, what: str) -> None:
        self.state.checks.failures_this_step += 1
        self.state.checks.last_failure = what[:500]

    def note_mcp_errors(self) -> None:
        """Connection errors of this run's MCP servers, for the timeline and /ops/."""
        for server, message in self.mcp.errors.items():
            self.event(EventType.MCP_SERVER_ERROR, {"server": server, "message": message})
        self.mcp.errors.clear()

    # -- tools ---------------------------------------------------------------------------

    def tool_names(self) -> list[str]:
        """The tools this task may call: the spec's, with `<server>__*` expanded."""
        names = [n for n in self.spec.tools if not n.endswith("__*")]
        return names + [n for n in self.mcp_specs if n not in names]

    def tool(self, name: str) -> ToolSpec:
        spec = self.mcp_specs.get(name)
        return spec if spec is not None else registry.get(name)

    def tool_context(self, row: ToolCall) -> ToolContext:
        # Each call has its own stop event: a timed-out, abandoned call keeps seeing it set.
        return ToolContext(
            task_id=str(self.task_id),
            call_id=row.call_id,
            workspace=self.workspace,
            timeout_s=self.tool_s,
            shared=self.shared,
        )
