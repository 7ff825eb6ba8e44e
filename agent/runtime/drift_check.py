"""Drift found before anything runs (issue #43): when a worker picks a task up (after a
decision, a redispatch, a retry, a resume) it compares the versions its head checkpoint was
written with to the code it runs (tasks.drift). Drift that does not touch what happens next is
recorded (a `version_drift` event naming what changed) and the run goes on. Drift that touches
a call pending since before the pick-up (its tool gone, its argument schema changed) stops
that call before it runs: a `version_drift` review (agent.runtime.review_gate), whatever
approval it carried. Calls proposed after the pick-up were proposed under this code."""

from __future__ import annotations

from typing import Any

from agent.runtime.review_gate import pause_for_version_drift
from agent.runtime.run import Run
from agent.versions import version_lookup, versions_current
from review import policy
from tasks.drift import Drift, drift
from tasks.events import EventType
from tasks.models import ToolCall
from tasks.tools.registry import ToolSpec


def _next_pending(run: Run) -> dict[str, Any] | None:
    state = run.state
    if state.next_call >= len(state.pending):
        return None
    call = state.pending[state.next_call]
    row = run.ledger.get(call.call_id)
    return {"tool": call.tool, "arguments": row.arguments if row is not None else call.args}


def drift_at_pickup(run: Run, checkpoint: Any) -> Drift | None:
    """Compare the head's versions with this worker's; record what changed. Remembers, for
    `drift_before_call`, the head's versions and the calls pending since before."""
    old = getattr(checkpoint, "versions", None) or {}
    state = run.state
    run.drift_base = old
    run.drift_calls = {call.call_id for call in state.pending[state.next_call :]}
    if not old:
        return None
    found = drift(old, versions_current(run), _next_pending(run), bodies=version_lookup(run))
    if found.any:
        run.event(
            EventType.VERSION_DRIFT,
            {
                "checkpoint_id": str(checkpoint.id),
                "changes": found.summary(),
                "touches_next": found.touches_next,
                "touches": found.touches,
            },
        )
    return found


def drift_before_call(run: Run, row: ToolCall, tool: ToolSpec | None) -> None:
    """Just before a call pending since before the pick-up runs (or is refused): if the
    drift touches it, pause for a `version_drift` review (does not return)."""
    drift_calls: set[str] = getattr(run, "drift_calls", set())
    if row.call_id not in drift_calls:
        return
    drift_calls.discard(row.call_id)
    found = drift(
        run.drift_base,
        versions_current(run),
        {"tool": row.tool, "arguments": row.arguments},
        bodies=version_lookup(run),
    )
    if not found.touches_next:
        return
    now = policy.evaluate(tool=tool, args=row.arguments, spec=run.task.spec) if tool else None
    pause_for_version_drift(run, row, drift=found.as_json(), policy=now)
