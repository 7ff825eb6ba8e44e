"""A migration a `version_drift` review chose that could not be carried out (issue #43): it
raised, returned no valid state, or is no longer in harness.yaml. The task does not fail: a
person chooses again. The version_drift review is reopened (its successor names it and says
why: `changes`, and `drift.migration_error`; audited as `review_reopened`), on the call pending
since before, which gets a fresh call_id on a new branch (the old one was closed when the
migration was chosen). Its choices are the review's: continue with the new code (the call
runs, arguments re-validated), another migration, restart, cancel. With no call pending the
task fails (`migration_failed`), as before."""

from __future__ import annotations

from typing import Any, NoReturn

from agent.runtime.ledger import ledger_row
from agent.runtime.review_gate import pause_for_version_drift
from agent.runtime.run import Run, StopRun
from checkpoints.recovery import calls_rekey, new_branch
from review import policy
from review.models import ReviewRequest
from tasks.tools.registry import UnknownTool

MIGRATION_FAILED = "migration_failed"


def migration_failed(run: Run, *, review_id: int, drift: dict[str, Any], error: str) -> NoReturn:
    state = run.state
    if state.next_call >= len(state.pending):
        raise StopRun(MIGRATION_FAILED, error)
    chosen = ReviewRequest.objects.get(id=review_id)
    state.branch = new_branch(run.task, state)
    calls_rekey(state, None)
    run.drift_calls = set()
    call = state.pending[state.next_call]
    try:
        tool = run.tool(call.tool) if call.tool in run.tool_names() else None
    except UnknownTool:
        tool = None
    row, _new = ledger_row(run, call, tool)
    now = policy.evaluate(tool=tool, args=row.arguments, spec=run.task.spec) if tool else None
    pause_for_version_drift(
        run,
        row,
        drift={**drift, "migration_error": error},
        policy=now,
        reopened_from=chosen,
        changes=[error],
    )
