"""Drift found before an SDK agent goes on (issue #43): when a worker picks up a Pydantic AI or
OpenAI Agents SDK task (after a decision, a redispatch, a retry, a resume) it compares the
versions its head checkpoint was written with to the agent it loaded now (tasks.drift), before
anything runs. One function for both runners (`sdk_drift_at_pickup`, called by agent.sdk_run.state's
SdkRun.resumed, the shared pick-up path).

What happens next is the agent's: its pending calls (approved or allowed under the old code,
not run yet) and then its next turn. Drift that touches neither (the policy, which every
approval is re-checked against anyway, the harness version) is a `version_drift` event and the
run goes on. A changed agent definition (instructions, tools and their argument schemas,
output type, handoffs) touches both: every pending call stops, whatever approved it, as a
`version_drift` review (review.services.drift_gate) saying what changed and whether its
arguments still validate; with no call pending, a call standing for the agent's next turn
awaits one. The choices are the native loop's (review.services.version_drift): `continue` goes
on under the new code (the pause wrote a checkpoint with its versions: the next pick-up finds
no drift), `restart`, `cancel`; `migrate` does not apply (migrations map the harness loop's
state)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from agent.versions import version_lookup, versions_current
from review.models import ReviewRequest
from review.services.drift_gate import VERSION_DRIFT, version_drift_request
from tasks import services
from tasks.drift import drift
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus

# A ledger row in these runs when the agent goes on: nobody refused it, it has not run.
PENDING = (ToolCallStatus.APPROVED, ToolCallStatus.PROPOSED)

# pause(rows, open_reviews): the runner's pause for review. It writes `rows` (new ones
# inserted, others' status updated), the events in run.pending_events and a `before_review`
# checkpoint with the versions the worker runs, calls open_reviews(checkpoint_id) and moves the
# task to waiting_review, all in one transaction; it does not return.
Pause = Callable[[list[ToolCall], Callable[[Any], None]], NoReturn]


def _restarted_under(run: Any, new: dict[str, Any]) -> bool:
    """A person chose `restart` on a version_drift review opened under this very agent: the
    restored checkpoint is older code by choice, and nothing approved before runs on the new
    branch (its calls get new ids)."""
    return ReviewRequest.objects.filter(
        task_id=run.task_id,
        kind=VERSION_DRIFT,
        choice__decision="restart",
        versions__agent=new.get("agent"),
    ).exists()


def sdk_drift_at_pickup(
    run: Any, checkpoint: Any, *, calls: Iterable[ToolCall], agent: str, pause: Pause
) -> None:
    """Before anything runs on resume: record drift; stop on drift that touches what happens
    next (raises through `pause`). `calls`: the ledger rows of the calls the head checkpoint
    holds pending; `agent`: the agent's name (the stand-in call's tool). Returns when the run
    may go on. `run`: task_id, epoch, state, pending_events and the versions it computes
    (agent.versions.versions_current)."""
    old = getattr(checkpoint, "versions", None) or {}
    new = versions_current(run)
    if not old or not new:
        return
    bodies = version_lookup(run)
    whole = drift(old, new, {"agent": True}, bodies=bodies)
    if not whole.any:
        return
    pending = [row for row in calls if row.status in PENDING]
    touched = [
        (row, found)
        for row in pending
        for found in [
            drift(
                old,
                new,
                {"tool": row.tool, "arguments": row.arguments, "agent": True},
                bodies=bodies,
            )
        ]
        if found.touches_next
    ]

    def event(type: str, payload: dict[str, Any]) -> Any:
        return services.event_build(
            task_id=run.task_id, type=type, payload=payload, step_index=run.state.step_index
        )

    touches = [line for _row, found in touched for line in found.touches] or whole.touches
    run.pending_events.append(
        event(
            EventType.VERSION_DRIFT,
            {
                "checkpoint_id": str(checkpoint.id),
                "changes": whole.summary(),
                "touches_next": bool(touches),
                "touches": touches,
                "calls": [row.call_id for row, _found in touched],
            },
        )
    )
    if not touches or (not touched and _restarted_under(run, new)):
        return
    if not touched:
        stand_in = ToolCall(
            task_id=run.task_id,
            call_id=f"sdkdrift:{checkpoint.id}:{run.epoch}"[:100],
            tool=agent[:100],
            arguments={},
            risk="agent",
            step_index=run.state.step_index,
        )
        touched = [(stand_in, whole)]
    opens = []
    for row, found in touched:
        requested, open_review = version_drift_request(
            tool_call=row,
            step_index=run.state.step_index,
            drift=found.as_json(),
            policy=None,
            versions=new,
        )
        run.pending_events.append(requested)
        opens.append(open_review)

    def open_reviews(checkpoint_id: Any) -> None:
        for open_review in opens:
            open_review(checkpoint_id)

    pause([row for row, _found in touched], open_reviews)
