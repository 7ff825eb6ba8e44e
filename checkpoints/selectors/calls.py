"""The ledger side of a rollback: the calls it undoes (how it undoes their effects outside the
workspace: tasks.selectors.compensation)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from checkpoints.services import LoadedCheckpoint
from tasks.agent_state import COMPENSATION_SUFFIX
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.selectors import task_tool
from tasks.tools.registry import ToolSpec

# Ledger statuses of calls that actually ran (or may have: running / unknown_outcome; a call
# waiting to be retried ran at least once).
EXECUTED = (
    ToolCallStatus.SUCCEEDED,
    ToolCallStatus.FAILED,
    ToolCallStatus.TIMED_OUT,
    ToolCallStatus.RUNNING,
    ToolCallStatus.UNKNOWN_OUTCOME,
    ToolCallStatus.RETRY_WAIT,
)
RETRYABLE = (ToolCallStatus.FAILED, ToolCallStatus.TIMED_OUT)


def tool_or_none(name: str, *, task_id: Any) -> ToolSpec | None:
    return task_tool(task_id=task_id, name=name)


def calls_undone(task: Task, loaded: LoadedCheckpoint) -> list[ToolCall]:
    """Ledger rows of the calls a rollback to this checkpoint undoes: those that ran after it
    was taken, and those its state has still pending (a `before_write_operation` checkpoint
    is taken just before its call runs: going back to it undoes that call, which runs again
    under a fresh call_id). Calls already finished in its state are kept, whatever their
    timestamps."""
    checkpoint, state = loaded.checkpoint, loaded.state
    done = {m.call_id for m in state.messages if m.role == "tool" and m.call_id}
    pending = {c.call_id for c in state.pending[state.next_call :]}
    after = Q(created_at__gte=checkpoint.created_at) | Q(started_at__gte=checkpoint.created_at)
    rows = list(
        ToolCall.objects.filter(
            after | Q(call_id__in=pending), task=task, status__in=EXECUTED
        ).order_by("id")
    )
    # An earlier rollback's compensations are not the agent's calls, and what they undid is
    # undone already: neither is undone (or compensated) again.
    compensated = {
        row.call_id.removesuffix(COMPENSATION_SUFFIX)
        for row in rows
        if row.call_id.endswith(COMPENSATION_SUFFIX) and row.status == ToolCallStatus.SUCCEEDED
    }
    return [
        row
        for row in rows
        if row.call_id not in done
        and not row.call_id.endswith(COMPENSATION_SUFFIX)
        and row.call_id not in compensated
    ]
