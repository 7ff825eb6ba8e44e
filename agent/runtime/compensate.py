"""A rollback's compensations (issue #44): the effects outside the workspace that a rollback
undoes, each by a compensating call the loop runs before anything else — in the reverse order
of the original calls (checkpoints.recovery.rollback wrote them into the state), each an
ordinary tool call (`call_run`: its own ledger row, the policy gate and its review, retries
for transient errors, its outputs on the task page) under an idempotency key derived from the
original call's, so a run stopped half-way meets the same ledger row again: a finished
compensation is replayed, never run twice, and an unfinished one is never skipped.

Never blind: a compensation runs only for an original the ledger shows succeeded. One whose
outcome is unknown goes to the unknown-outcome review first (marked done: then compensated;
run again: it did not happen, nothing to undo); one the ledger shows not executed has nothing
to undo. A compensation that fails for good stops the task in `compensation_failed`, its error
naming the effect still in the world, for an operator to retry, mark done or skip
(checkpoints.recovery.compensation)."""

from __future__ import annotations

import json
from typing import Any

from agent.runtime.calls import call_run
from agent.runtime.review_gate import escalate_unknown_outcome
from agent.runtime.run import Run, StopRun
from agent.runtime.start import context_align_now
from harness_base import telemetry
from review.compensation import compensation_policy
from tasks.agent_state import Compensation, ProposedCall
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus
from tasks.selectors import UNKNOWN, Irreversible, PlannedCompensation, compensation_for
from tasks.states import TaskStatus
from tasks.tools.registry import UnknownTool

COMPENSATION_FAILED = "compensation_failed"
RESULT_CHARS = 300


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"


def effect_named(item: Compensation) -> str:
    return f"{item.original_tool} ({item.original_call_id})"


def _original(run: Run, item: Compensation) -> ToolCall | None:
    row = run.ledger.get(item.original_call_id)
    if row is None:
        row = ToolCall.objects.filter(task_id=run.task_id, call_id=item.original_call_id).first()
        if row is not None:
            run.ledger[row.call_id] = row
    return row


def _settle(run: Run, item: Compensation, outcome: str, result: Any, **extra: Any) -> None:
    item.outcome = outcome
    item.result = result
    run.event(
        EventType.COMPENSATED,
        {
            "call_id": item.call_id,
            "original_call_id": item.original_call_id,
            "original_tool": item.original_tool,
            "tool": item.tool,
            "outcome": outcome,
            "result": _short(result),
            **extra,
        },
    )


def compensation_next(run: Run) -> None:
    """Run the next pending compensation (or settle it without running it), then make its
    outcome durable with a checkpoint; after the last, tell the agent and go on."""
    item = run.state.compensation_open()
    if item is None:
        return
    original = _original(run, item)
    status = original.status if original is not None else None
    if original is not None and status in UNKNOWN:
        # Never blind: a person says whether it took effect before anything undoes it.
        escalate_unknown_outcome(
            run,
            original,
            message=(
                f"{original.tool} (call {original.call_id}) may or may not have taken effect; "
                f"the rollback compensates it with {item.tool} only if it did: mark it done "
                "if it took effect, re-run if it did not (nothing to undo then)"
            ),
        )
    if original is None or status != ToolCallStatus.SUCCEEDED:
        _settle(
            run,
            item,
            "skipped",
            f"nothing to undo: the ledger shows {item.original_tool} {item.original_call_id} "
            f"{status or 'never recorded'}",
        )
    elif _resolved(run, item, original):
        _compensate(run, item, original)
    if run.state.compensation_open() is None:
        _finish(run)
    else:
        run.commit(trigger="compensation", level="step")


def _resolved(run: Run, item: Compensation, original: ToolCall) -> bool:
    """An original whose outcome was unknown when the rollback was planned, now said by a
    person to have taken effect: its compensation computed again from what is recorded now
    (its arguments may need the result). False: it cannot be computed (settled as skipped,
    with why)."""
    if not item.outcome_unknown and item.args is not None:
        return True
    found = compensation_for(original, task=run.task)
    if isinstance(found, PlannedCompensation) and found.arguments is not None:
        item.tool, item.args, item.review = found.tool, found.arguments, found.review
        return True
    why = found.why if isinstance(found, Irreversible) else "its compensation needs a result"
    _settle(run, item, "skipped", f"cannot be undone: {why}")
    return False


def _compensate(run: Run, item: Compensation, original: ToolCall) -> None:
    call = ProposedCall(call_id=item.call_id, tool=item.tool, args=item.args or {})
    try:
        tool = run.tool(item.tool)
    except UnknownTool:
        tool = None
    # A compensation of a reviewed call is reviewed unless a rule allows it (review.compensation):
    # the gate meets that review where its own rules would let the call through.
    floor = compensation_policy(task=run.task, call=original, tool=tool, arguments=call.args)
    with telemetry.log_context(call_id=item.call_id):
        outcome = call_run(
            run,
            call,
            compensation=True,
            review_floor=floor if floor.action == "review" else None,
        )
    row = run.ledger.get(item.call_id)
    if outcome.status == ToolCallStatus.SUCCEEDED:
        marked = isinstance(outcome.result, dict) and "marked_done_by" in outcome.result
        _settle(run, item, "marked_done" if marked else "compensated", outcome.result)
        return
    if outcome.status == ToolCallStatus.REJECTED:
        # A reviewer rejected it, or an operator chose to leave the effect in the world.
        _settle(run, item, "skipped", outcome.error_message or outcome.observation)
        return
    message = (
        f"the effect of {effect_named(item)} is still in the world: its compensation "
        f"{item.tool} {_short(item.args)} {outcome.status}: "
        f"{outcome.error_message or outcome.observation}"
    )
    run.event(
        EventType.COMPENSATION_FAILED,
        {
            "call_id": item.call_id,
            "original_call_id": item.original_call_id,
            "original_tool": item.original_tool,
            "tool": item.tool,
            "status": outcome.status,
            "attempts": row.attempts if row is not None else 0,
            "error_class": outcome.error_class,
            "message": message[:2000],
        },
    )
    raise StopRun(COMPENSATION_FAILED, message)


def _finish(run: Run) -> None:
    """Every compensation settled: the agent's recovery note gets what was compensated and
    what could not be undone, the context is aligned (deferred until now by the start of the
    run), and the task goes on or is held as the rollback asked."""
    state = run.state
    done = [c for c in state.compensations if c.outcome in ("compensated", "marked_done")]
    left = [c for c in state.compensations if c.outcome == "skipped"]
    if state.recovery is not None:
        state.recovery.undone["compensated"] = [
            f"{effect_named(c)} undone by {c.tool} {_short(c.args)}"
            + (" (marked done by an operator)" if c.outcome == "marked_done" else "")
            + f" -> {_short(c.result)}"
            for c in done
        ][:100]
        state.recovery.undone["not_undone"] = [
            *state.recovery.undone.get("not_undone", []),
            *(f"{effect_named(c)}: {_short(c.result)}" for c in left),
        ][:100]
    run.event(
        EventType.COMPENSATIONS_DONE,
        {
            "compensated": [c.call_id for c in done],
            "skipped": [c.call_id for c in left],
            "then": state.after_compensations,
        },
    )
    context_align_now(run)
    if state.after_compensations == "hold":
        state.after_compensations = "resume"
        run.stage(trigger="compensation", level="step")
        run.pause(
            to=TaskStatus.HELD,
            trigger=None,
            reason="rollback: compensations done, held as the operator asked",
        )
    run.commit(trigger="compensation", level="step")
