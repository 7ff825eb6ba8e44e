"""The call ledger of a run: one ToolCall row per call_id, the idempotency key of a call."""

from __future__ import annotations

from agent.runtime.run import Run, StopRun
from tasks.agent_state import ProposedCall
from tasks.models import ToolCall
from tasks.tools.registry import ToolSpec


def ledger_load(run: Run) -> None:
    """The ledger rows a resumed run may meet again: calls proposed at or after the loaded
    step (a resumed or retried step re-proposes the same call_ids). Only the lease holder
    writes a running task's ledger, so the rows this run creates join as it goes and no
    call needs a query of its own."""
    run.ledger = {
        row.call_id: row
        for row in ToolCall.objects.filter(
            task_id=run.task_id, step_index__gte=run.state.step_index
        )
    }


def ledger_row(run: Run, call: ProposedCall, tool: ToolSpec | None) -> tuple[ToolCall, bool]:
    """The call's row, and whether it is new (unsaved: the next durable write inserts it)."""
    row = run.ledger.get(call.call_id)
    if row is not None:
        if row.arguments != call.args and not row.arguments_hash:
            raise StopRun(
                "idempotency_conflict",
                f"call_id {call.call_id} reused with different arguments",
            )
        return row, False
    row = ToolCall(
        task_id=run.task_id,
        call_id=call.call_id,
        tool=call.tool,
        arguments=call.args,
        risk=tool.risk if tool else "read",
        step_index=run.state.step_index,
        # A dry run's calls are no tool's outcome (agent.runtime.plan; left out of statistics).
        plan_mark="planned" if run.planning else "",
    )
    run.ledger[call.call_id] = row
    return row, True
