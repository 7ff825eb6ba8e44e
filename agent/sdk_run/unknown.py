"""A call that was running when its worker died, met again by an SDK runner (OpenAI Agents
SDK, Pydantic AI; issue #47): the native loop's unknown-outcome flow (agent.runtime.call_again).
It is never run again unasked: its outcome becomes unknown and an `unknown_outcome` review
(review.services.gates.review_gate_unknown_outcome) asks a person to mark it done (with what it
returned), run it again or fail the task (review.services.unknown_outcome). The runner's
pause (SdkRun.pause_written) writes it; once decided, the ledger row answers the SDK:

- marked done: the row is `succeeded` with the operator's result, which the SDK gets as the
  tool's output (`settled_output`) without the tool running;
- run again: the row is `approved`, and the tool runs once more under the same call id;
- fail the task: the task is failed; nothing runs.

A row still `unknown_outcome` when its task is picked up (its review pending, or closed with
no answer) takes the same way: never run, asked about (a pending review is not opened twice)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from agent.versions import versions_current
from review.services.gates import review_gate_unknown_outcome
from tasks.models import ToolCall, ToolCallStatus

if TYPE_CHECKING:
    from agent.sdk_run.state import SdkRun

# The ledger statuses of a call whose worker stopped while it ran.
INTERRUPTED = (ToolCallStatus.RUNNING, ToolCallStatus.UNKNOWN_OUTCOME)


class _Asked(Exception):
    """What one call's gate would pause with: its events and the opener of its review."""

    def __init__(self, events: list[Any], open_review: Callable[[Any], None]) -> None:
        super().__init__("unknown outcome")
        self.events = events
        self.open_review = open_review


def _collect(events: list[Any], open_review: Callable[[Any], None]) -> NoReturn:
    raise _Asked(events, open_review)


def unknown_outcomes_ask(run: SdkRun, rows: list[ToolCall]) -> NoReturn:
    """`rows` (calls the ledger holds `running` or `unknown_outcome` on pick-up) asked about in
    one pause: each call's outcome unknown (`tool_unknown_outcome`) and its `unknown_outcome`
    review opened with the pause's `before_review` checkpoint; the task waits for review.
    The runner's pause_written does not return."""
    asked: list[_Asked] = []
    for row in rows:
        try:
            review_gate_unknown_outcome(
                tool_call=row,
                step_index=run.state.step_index,
                pause=_collect,
                versions=versions_current(run),
            )
        except _Asked as found:
            asked.append(found)
    for gate in asked:
        run.pending_events.extend(gate.events)

    def open_reviews(checkpoint_id: Any) -> None:
        for gate in asked:
            gate.open_review(checkpoint_id)

    run.pause_written(f"unknown outcome: {rows[0].tool}", rows, open_reviews)


def settled_output(row: ToolCall, key: str) -> Any:
    """What the SDK gets as the output of a call the ledger holds `succeeded`: what the tool
    returned, as the runner stored it (`{key: output}`), or what an operator marked the call
    done with (review_resolve_unknown_outcome's `result`: a value of theirs, or a note naming
    who marked it and their comment)."""
    result = row.result
    if isinstance(result, dict) and key in result:
        return result[key]
    return result
