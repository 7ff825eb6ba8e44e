"""A tool call met again (its ledger row exists): a settled call returns its stored outcome;
one a worker stopped in runs again if idempotent, else its outcome is unknown and a human
decides."""

from __future__ import annotations

from agent.runtime.attempt import ToolOutcome, observation
from agent.runtime.review_gate import escalate_unknown_outcome
from agent.runtime.run import Run
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus
from tasks.outputs import live_output_get, output_rows_last_seen
from tasks.tools.registry import UnknownTool


def replay_outcome(run: Run, row: ToolCall) -> ToolOutcome | None:
    """A call already settled in the ledger returns its stored outcome, never re-runs."""
    if row.status == ToolCallStatus.SUCCEEDED:
        run.event(EventType.TOOL_REPLAYED, {"call_id": row.call_id, "tool": row.tool})
        return ToolOutcome(
            status=row.status, observation=observation(row.result), result=row.result
        )
    if row.status in (
        ToolCallStatus.FAILED,
        ToolCallStatus.TIMED_OUT,
        ToolCallStatus.DENIED,
        ToolCallStatus.REJECTED,
    ):
        result = row.result if isinstance(row.result, dict) else {}
        message = result.get("observation")
        return ToolOutcome(
            status=row.status,
            observation=message or row.error_message,
            error_class=row.error_class,
            error_message=row.error_message,
        )
    if row.status in (ToolCallStatus.RUNNING, ToolCallStatus.UNKNOWN_OUTCOME):
        return _on_interrupted_call(run, row)
    return None


def _on_interrupted_call(run: Run, row: ToolCall) -> ToolOutcome | None:
    """The ledger says this call was running when its worker stopped. An idempotent tool
    runs again with the same call_id; a non-idempotent one is never blindly re-run: its
    outcome is unknown and a human decides (mark it done, re-run it, or fail the task)."""
    try:
        tool = run.tool(row.tool)
    except UnknownTool:
        tool = None
    if row.status == ToolCallStatus.RUNNING and tool is not None and tool.idempotent:
        run.event(EventType.TOOL_RERUN_IDEMPOTENT, {"call_id": row.call_id, "tool": row.tool})
        return None
    if row.status == ToolCallStatus.RUNNING:
        # What the page last showed of it, for the person who decides what happened.
        seen = live_output_get(task_id=run.task_id)
        if seen and seen.get("call_id") == row.call_id and seen.get("attempt") == row.attempts:
            run.pending_outputs += output_rows_last_seen(task_id=run.task_id, record=seen)
    escalate_unknown_outcome(run, row)
